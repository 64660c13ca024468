package main

// opts.go — the command line of saga-examples/common/sx_svc.c in Go: the same flags, each also
// from SAGA_<FLAG> in the environment (the flag wins), the same defaults, the same refusals
// (usage on stderr, exit 2), and the crash points for fault injection.

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"syscall"
)

type point int

const (
	afterBegin point = iota
	afterWrite
	afterComplete
)

var pointNames = []string{"after_begin", "after_write", "after_complete"}

type opts struct {
	listen, pg, schema, coordinator, tenant string
	payments, inventory, stock              string // accepted for the shared flag set; unused here
	threads                                 int
	leaseMs                                 int64
	stepDeadlineMs, callDeadlineMs          int64
	crashPoint                              int // -1 = none
	crashOperation                          string
	crashRate                               float64
}

var flagEnv = [][2]string{
	{"--listen", "SAGA_LISTEN"}, {"--pg", "SAGA_PG"}, {"--schema", "SAGA_SCHEMA"},
	{"--coordinator", "SAGA_COORDINATOR"}, {"--tenant", "SAGA_TENANT"},
	{"--payments", "SAGA_PAYMENTS"}, {"--inventory", "SAGA_INVENTORY"}, {"--stock", "SAGA_STOCK"},
	{"--threads", "SAGA_THREADS"}, {"--lease-ms", "SAGA_LEASE_MS"}, {"--crash", "SAGA_CRASH"},
	{"--crash-rate", "SAGA_CRASH_RATE"}, {"--step-deadline-ms", "SAGA_STEP_DEADLINE_MS"},
	{"--call-deadline-ms", "SAGA_CALL_DEADLINE_MS"},
}

func usage(prog, bad string) {
	if bad != "" {
		fmt.Fprintf(os.Stderr, "%s: %s\n", prog, bad)
	}
	fmt.Fprintf(os.Stderr,
		"usage: %s --listen ADDR --pg URL --schema NAME --coordinator ADDR [--tenant T]\n"+
			"       [--threads N] [--lease-ms N] [--step-deadline-ms N] [--call-deadline-ms N]\n"+
			"       [--payments ADDR --inventory ADDR] [--stock sku=N,...]\n"+
			"       [--crash after_begin|after_write|after_complete[:OPERATION]] [--crash-rate P]\n",
		prog)
	os.Exit(2)
}

func num(prog, flag, v string, lo, hi int64) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		usage(prog, fmt.Sprintf("%s: not a number in [%d, %d]: %s", flag, lo, hi, v))
	}
	return n
}

func (o *opts) apply(prog string, i int, v string) {
	switch i {
	case 0:
		o.listen = v
	case 1:
		o.pg = v
	case 2:
		o.schema = v
	case 3:
		o.coordinator = v
	case 4:
		o.tenant = v
	case 5:
		o.payments = v
	case 6:
		o.inventory = v
	case 7:
		o.stock = v
	case 8:
		o.threads = int(num(prog, flagEnv[i][0], v, 1, 256))
	case 9:
		o.leaseMs = num(prog, flagEnv[i][0], v, 0, 3600000)
	case 10:
		p, op, _ := strings.Cut(v, ":")
		o.crashOperation = op
		o.crashPoint = -1
		for k, name := range pointNames {
			if p == name {
				o.crashPoint = k
			}
		}
		if o.crashPoint < 0 {
			usage(prog, "--crash: unknown point")
		}
	case 11:
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r > 1 {
			usage(prog, "--crash-rate: 0..1")
		}
		o.crashRate = r
	case 12:
		o.stepDeadlineMs = num(prog, flagEnv[i][0], v, 1, 3600000)
	case 13:
		o.callDeadlineMs = num(prog, flagEnv[i][0], v, 1, 3600000)
	}
}

func parseOpts(args []string) *opts {
	prog := args[0]
	o := &opts{tenant: "shop", threads: 8, stepDeadlineMs: 10000, callDeadlineMs: 20000,
		crashPoint: -1}
	for i, f := range flagEnv {
		if v := os.Getenv(f[1]); v != "" {
			o.apply(prog, i, v)
		}
	}
	for a := 1; a < len(args); a++ {
		if args[a] == "--help" {
			usage(prog, "")
		}
		i := 0
		for i < len(flagEnv) && flagEnv[i][0] != args[a] {
			i++
		}
		if i == len(flagEnv) {
			usage(prog, "unknown flag")
		}
		if a+1 >= len(args) {
			usage(prog, "missing value")
		}
		a++
		o.apply(prog, i, args[a])
	}
	if o.listen == "" || o.pg == "" || o.schema == "" || o.coordinator == "" {
		usage(prog, "--listen, --pg, --schema and --coordinator are required")
	}
	if len(o.schema) > 63 || strings.Trim(o.schema, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		usage(prog, "--schema: 1-63 characters of [a-z0-9_]")
	}
	return o
}

// crash SIGKILLs this process at point p when --crash or --crash-rate says so.
func (o *opts) crash(p point, operation string) {
	die := o.crashPoint == int(p) && (o.crashOperation == "" || o.crashOperation == operation)
	if o.crashRate > 0 && rand.Float64() < o.crashRate {
		die = true
	}
	if !die {
		return
	}
	fmt.Fprintf(os.Stderr, "fault injection: SIGKILL at %s of %s\n", pointNames[p], operation)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal arrives
}
