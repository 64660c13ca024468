// Command idem-failover-client runs steps through the Go SDK's step helper (Client.Run) for the
// failover test (tests/sdk/failover.py) and the per-SDK figures (bench/sdk-bench). The same
// command line as client-lib/node/test/failover-client.js and
// client-lib/python/tests/failover_client.py:
//
//	idem-failover-client --addresses LEADER,STANDBY --tenant T --ledger FILE --prefix P
//	    --steps N --duration S [--repeat 3] [--workers 4] [--lease-ms 3000] [--bench]
//
// Failover mode: keys P-0 … P-(N-1), each run --repeat times (rounds in order, so that later
// rounds replay); --workers goroutines take the runs in turn. The action appends "KEY ATTEMPT"
// to the ledger and fsyncs it before returning, so the ledger counts every execution. A run
// that ends in an error is counted (errors by code) and run again until it settles or the
// --duration bound passes (then it is "unsettled").
//
// Bench mode (--bench): --workers (16 unless given) run a new key each, with an action that does
// nothing, for --duration seconds; the ledger is not written.
//
// Prints one JSON line: sdk, mode, runs, ran, replayed, takeovers, errors {code: n}, unsettled,
// elapsed_ms, and in bench mode pairs_per_s, p50_ms, p99_ms. Exits 0 when the summary was
// printed (the caller judges it), 2 on bad arguments.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	idem "idem.dev/client"
)

type summary struct {
	SDK       string         `json:"sdk"`
	Mode      string         `json:"mode"`
	Runs      int64          `json:"runs"`
	Ran       int64          `json:"ran"`
	Replayed  int64          `json:"replayed"`
	Takeovers int64          `json:"takeovers"`
	Errors    map[string]int `json:"errors"`
	Unsettled int64          `json:"unsettled"`
	ElapsedMs int64          `json:"elapsed_ms"`
	PairsPerS *float64       `json:"pairs_per_s,omitempty"`
	P50Ms     *float64       `json:"p50_ms,omitempty"`
	P99Ms     *float64       `json:"p99_ms,omitempty"`
}

type state struct {
	mu     sync.Mutex
	sum    summary
	ledger *os.File
	lat    []time.Duration
}

func (s *state) countErr(code string) {
	s.mu.Lock()
	s.sum.Errors[code]++
	s.mu.Unlock()
}

// record appends "KEY ATTEMPT" to the ledger and fsyncs it before the action returns.
func (s *state) record(key string, attempt uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.ledger.WriteString(key + " " + strconv.FormatUint(attempt, 10) + "\n"); err != nil {
		return err
	}
	return s.ledger.Sync()
}

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "idem-failover-client: "+format+"\n", a...)
	os.Exit(2)
}

func main() {
	addresses := flag.String("addresses", "", "LEADER,STANDBY (host:port list)")
	tenant := flag.String("tenant", "", "tenant")
	ledger := flag.String("ledger", "", "file the action appends \"KEY ATTEMPT\" to (failover mode)")
	prefix := flag.String("prefix", "", "key prefix (the steps' global ids are PREFIX-N)")
	steps := flag.Int("steps", 0, "keys to run (failover mode)")
	duration := flag.Float64("duration", 30, "bound in seconds (bench mode: how long to run)")
	repeat := flag.Int("repeat", 3, "runs of each key (failover mode)")
	workers := flag.Int("workers", 0, "concurrent runs (default 4, bench 16)")
	leaseMs := flag.Int("lease-ms", 3000, "the steps' lease (0: the policy's)")
	bench := flag.Bool("bench", false, "bench mode: new key per run, no ledger")
	flag.Parse()
	if *addresses == "" || *tenant == "" || *prefix == "" {
		fail("--addresses, --tenant and --prefix are required")
	}
	if !*bench && (*ledger == "" || *steps <= 0 || *repeat <= 0) {
		fail("failover mode needs --ledger, --steps > 0 and --repeat > 0")
	}
	if *duration <= 0 {
		fail("--duration must be > 0")
	}
	if *workers <= 0 {
		*workers = 4
		if *bench {
			*workers = 16
		}
	}
	c, err := idem.Connect(idem.Options{Address: *addresses, Tenant: *tenant})
	if err != nil {
		fail("connect: %v", err)
	}
	defer c.Close()

	s := &state{sum: summary{SDK: "go", Mode: "failover", Errors: map[string]int{}}}
	if *bench {
		s.sum.Mode = "bench"
	} else {
		f, err := os.OpenFile(*ledger, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fail("ledger: %v", err)
		}
		defer f.Close()
		s.ledger = f
	}
	bound := time.Duration(*duration * float64(time.Second))
	start := time.Now()
	end := start.Add(bound)
	opts := idem.RunOptions{Lease: time.Duration(*leaseMs) * time.Millisecond}
	total := int64(*steps) * int64(*repeat)
	var next int64 = -1
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for {
				n := atomic.AddInt64(&next, 1)
				if *bench {
					if !time.Now().Before(end) {
						break
					}
				} else if n >= total {
					break
				}
				var gid string
				if *bench {
					gid = *prefix + "-" + strconv.FormatInt(n, 10)
				} else {
					gid = *prefix + "-" + strconv.FormatInt(n%int64(*steps), 10)
				}
				key := idem.StepKey{GlobalID: gid, Service: "failover", Operation: "step"}
				for {
					left := time.Until(end)
					if left <= 0 {
						atomic.AddInt64(&s.sum.Unsettled, 1)
						break
					}
					o := opts
					if left < 10*time.Second && !*bench { // bench: a run started is not cut short
						o.Deadline = left
					}
					t0 := time.Now()
					rep, err := c.Run(context.Background(), key, o, func(ctx context.Context, sc idem.StepContext) idem.Result {
						if s.ledger != nil {
							if err := s.record(gid, sc.Attempt); err != nil {
								fmt.Fprintf(os.Stderr, "idem-failover-client: ledger: %v\n", err)
								os.Exit(1)
							}
						}
						return idem.Result{Outcome: idem.OutcomeSucceeded, Code: 200, Body: []byte(gid)}
					})
					if err != nil {
						s.countErr(idem.Code(err))
						if *bench {
							break
						}
						continue
					}
					lat = append(lat, time.Since(t0))
					atomic.AddInt64(&s.sum.Runs, 1)
					if rep.Ran {
						atomic.AddInt64(&s.sum.Ran, 1)
					}
					if rep.Replayed {
						atomic.AddInt64(&s.sum.Replayed, 1)
					}
					if rep.Takeover {
						atomic.AddInt64(&s.sum.Takeovers, 1)
					}
					break
				}
			}
			s.mu.Lock()
			s.lat = append(s.lat, lat...)
			s.mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	s.sum.ElapsedMs = elapsed.Milliseconds()
	if *bench && len(s.lat) > 0 {
		sort.Slice(s.lat, func(i, j int) bool { return s.lat[i] < s.lat[j] })
		ms := func(q float64) *float64 {
			v := float64(s.lat[int(q*float64(len(s.lat)-1))].Microseconds()) / 1000
			return &v
		}
		rate := float64(s.sum.Runs) / elapsed.Seconds()
		s.sum.PairsPerS, s.sum.P50Ms, s.sum.P99Ms = &rate, ms(0.50), ms(0.99)
	}
	out, _ := json.Marshal(s.sum)
	fmt.Println(string(out))
}
