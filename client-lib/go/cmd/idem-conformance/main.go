// Command idem-conformance runs client-lib/conformance/scenarios.json against real
// coordinators with the Go SDK (client-lib/conformance/README.md: environment, format and
// output). Run it through client-lib/conformance/run (see client-lib/go/conformance.sh).
// Arguments, when given, name the scenarios to run. A scenario that needs a capability this runner
// lacks is printed "skip NAME: needs WHAT". Exits 0 only when every scenario it ran passed.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	idem "idem.dev/client"
)

type resultJSON struct {
	Outcome string `json:"outcome"`
	Code    int32  `json:"code"`
	Body    string `json:"body"`
	SleepMs int    `json:"sleep_ms"` // action: it takes this long
}

type call struct {
	Call        string     `json:"call"`
	Step        string     `json:"step"`
	Service     string     `json:"service"`
	Operation   string     `json:"operation"`
	Phase       string     `json:"phase"`
	Fingerprint *string    `json:"fingerprint"`
	Action      resultJSON `json:"action"`
	Result      resultJSON `json:"result"`
	Options     struct {
		DeadlineMs int  `json:"deadline_ms"`
		NoWait     bool `json:"no_wait"`
		LeaseMs    int  `json:"lease_ms"`
	} `json:"options"`
	Rules       []json.RawMessage          `json:"rules"`
	Background  string                     `json:"background"`
	LeaseMs     int                        `json:"lease_ms"`
	Attempt     uint64                     `json:"attempt"`
	FailureMode string                     `json:"failure_mode"`
	RetentionS  int64                      `json:"retention_s"`
	KeyRetS     int64                      `json:"key_retention_s"`
	Method      string                     `json:"method"`
	Code        json.RawMessage            `json:"code"` // count_calls: a code name or "any"
	Ms          int                        `json:"ms"`
	Expect      map[string]json.RawMessage `json:"expect"`
}

type scenario struct {
	Name    string   `json:"name"`
	Client  string   `json:"client"`
	Journal bool     `json:"journal"`
	Needs   []string `json:"needs"`
	Calls   []call   `json:"calls"`
}

// has: the capabilities a scenario's "needs" may name that this runner has (none: the Go SDK
// has no ResolveStep, "resolve").
var has = map[string]bool{}

// got is what a call did, in the terms expect checks.
type got struct {
	err                                           error
	ran, replayed, takeover, unguarded, journaled bool
	decision                                      idem.Decision
	attempt                                       uint64
	result                                        idem.Result
	count                                         int
	policy                                        *idem.Policy // policy_set: the stored one
}

type scene struct {
	c       *idem.Client
	gid     string
	journal string
	counted map[string]int // count_calls: the last total of each method
}

func (s *scene) key(cl call) idem.StepKey {
	k := idem.StepKey{GlobalID: s.gid, Service: cl.Service, Operation: cl.Step, Phase: idem.Forward}
	if k.Service == "" {
		k.Service = "conformance"
	}
	if cl.Phase == "compensation" {
		k.Phase = idem.Compensation
	}
	return k
}

func fp(cl call) []byte {
	if cl.Fingerprint == nil {
		return nil
	}
	return []byte(*cl.Fingerprint)
}

func toResult(r resultJSON) idem.Result {
	o, ok := idem.ParseOutcome(r.Outcome)
	if !ok {
		o = idem.OutcomeUnknown
	}
	return idem.Result{Outcome: o, Code: r.Code, Body: []byte(r.Body)}
}

func (s *scene) run(cl call) got {
	o := idem.RunOptions{Fingerprint: fp(cl), Deadline: 10 * time.Second}
	if cl.Options.DeadlineMs > 0 {
		o.Deadline = time.Duration(cl.Options.DeadlineMs) * time.Millisecond
	}
	if cl.Options.NoWait {
		o.InProgress = idem.Backoff
	}
	o.Lease = time.Duration(cl.Options.LeaseMs) * time.Millisecond
	act := toResult(cl.Action)
	sleep := time.Duration(cl.Action.SleepMs) * time.Millisecond
	rep, err := s.c.Run(context.Background(), s.key(cl), o, func(context.Context, idem.StepContext) idem.Result {
		time.Sleep(sleep)
		return act
	})
	g := got{err: err}
	if rep != nil {
		g.ran, g.replayed, g.takeover, g.unguarded, g.journaled = rep.Ran, rep.Replayed, rep.Takeover, rep.Unguarded, rep.Journaled
		g.decision, g.attempt, g.result = rep.Decision, rep.Attempt, rep.Result
	}
	return g
}

func (s *scene) do(cl call) got {
	ctx := context.Background()
	switch cl.Call {
	case "run":
		return s.run(cl)
	case "begin":
		b, err := s.c.BeginStep(ctx, s.key(cl), idem.BeginOptions{Fingerprint: fp(cl),
			Lease: time.Duration(cl.LeaseMs) * time.Millisecond})
		g := got{err: err}
		if b != nil {
			g.decision, g.attempt, g.takeover = b.Decision, b.Attempt, b.Takeover
			if b.Result != nil {
				g.result = *b.Result
			}
		}
		return g
	case "complete":
		rec, err := s.c.CompleteStep(ctx, s.key(cl), cl.Attempt, toResult(cl.Result))
		g := got{err: err}
		if rec != nil {
			g.attempt = rec.Attempt
			if rec.Result != nil {
				g.result = *rec.Result
			}
		}
		return g
	case "policy_set":
		mode := idem.FailClosed
		if cl.FailureMode == "fail-open" {
			mode = idem.FailOpen
		}
		// as given (absent = 0): 0 is the SDK's to fill with the built-in default
		p := idem.Policy{Service: cl.Service, Operation: cl.Operation, FailureMode: mode,
			Retention:    time.Duration(cl.RetentionS) * time.Second,
			Lease:        time.Duration(cl.LeaseMs) * time.Millisecond,
			KeyRetention: time.Duration(cl.KeyRetS) * time.Second}
		stored, err := s.c.SetPolicy(ctx, p)
		return got{err: err, policy: stored}
	case "sleep":
		time.Sleep(time.Duration(cl.Ms) * time.Millisecond)
		return got{}
	case "count_calls":
		code := "OK"
		if len(cl.Code) > 0 {
			if err := json.Unmarshal(cl.Code, &code); err != nil {
				return got{err: fmt.Errorf("count_calls: code must be a code name or \"any\"")}
			}
		}
		return s.countCalls(cl.Method, code)
	case "policy_prefetch":
		return got{err: s.c.PrefetchPolicy(ctx, cl.Service, cl.Operation)}
	case "stop_coordinator":
		cmd := exec.Command("sh", "-c", os.Getenv("IDEM_CONFORMANCE_STOP"))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if os.Getenv("IDEM_CONFORMANCE_STOP") == "" {
			return got{err: fmt.Errorf("IDEM_CONFORMANCE_STOP is not set")}
		}
		return got{err: cmd.Run()}
	case "faults": // the lossy front's rules: a new file renamed over the old
		path := os.Getenv("IDEM_CONFORMANCE_FAULTS")
		rules := cl.Rules
		if rules == nil {
			rules = []json.RawMessage{}
		}
		text, err := json.Marshal(map[string]interface{}{"rules": rules})
		if err == nil {
			err = os.WriteFile(path+".new", text, 0o644)
		}
		if err == nil {
			err = os.Rename(path+".new", path)
		}
		return got{err: err}
	case "journal_lines":
		g := got{}
		f, err := os.Open(s.journal)
		if err != nil {
			return g // no journal: no lines
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "" {
				g.count++
			}
		}
		return g
	}
	return got{err: fmt.Errorf("unknown call %q", cl.Call)}
}

// countCalls reads idem_rpc_calls_total of method (Coordinator/method when it names no service)
// with code (a code name, or "any": every code summed) from the leader's /metrics
// (IDEM_METRICS_ADDRESS): count is the calls since this scenario's previous count of both.
func (s *scene) countCalls(method, code string) got {
	resp, err := http.Get("http://" + os.Getenv("IDEM_METRICS_ADDRESS") + "/metrics")
	if err != nil {
		return got{err: err}
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return got{err: err}
	}
	full := method
	if !strings.Contains(method, "/") {
		full = "Coordinator/" + method
	}
	want := `idem_rpc_calls_total{method="` + full + `",code="`
	if code != "any" {
		want += code + `"} `
	}
	total, seen := 0, false
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, want) {
			n, err := strconv.Atoi(strings.TrimSpace(line[strings.Index(line, "} ")+2:]))
			if err != nil {
				return got{err: err}
			}
			total, seen = total+n, true
		}
	}
	if !seen {
		return got{err: fmt.Errorf("no %s on the leader's /metrics", want)}
	}
	if s.counted == nil {
		s.counted = map[string]int{}
	}
	counted := method + " " + code
	g := got{count: total - s.counted[counted]}
	s.counted[counted] = total
	return g
}

// check compares g with expect; "" when they agree.
func check(expect map[string]json.RawMessage, g got) string {
	var diffs []string
	code := idem.Code(g.err)
	for name, raw := range expect {
		var b bool
		var s string
		var n int64
		var list []string
		switch name {
		case "ok":
			_ = json.Unmarshal(raw, &b)
			if b != (g.err == nil) {
				diffs = append(diffs, fmt.Sprintf("ok %v, got %s (%s) %v", b, code, idem.Reason(g.err), g.err))
			}
		case "error":
			if json.Unmarshal(raw, &list) != nil {
				_ = json.Unmarshal(raw, &s)
				list = []string{s}
			}
			match := false
			for _, w := range list {
				match = match || w == code
			}
			var e *idem.Error
			if !match {
				diffs = append(diffs, fmt.Sprintf("error %v, got %s", list, code))
			} else if code == idem.CodeStepUnknown && !(errors.As(g.err, &e) && e.OutcomeUnknown) {
				diffs = append(diffs, "error STEP_UNKNOWN without OutcomeUnknown") // errors.go, api.md §20
			}
		case "reason":
			_ = json.Unmarshal(raw, &s)
			if s != idem.Reason(g.err) {
				diffs = append(diffs, fmt.Sprintf("reason %s, got %q", s, idem.Reason(g.err)))
			}
		case "detail", "hint":
			_ = json.Unmarshal(raw, &s)
			var have string
			var e *idem.Error
			if errors.As(g.err, &e) {
				have = map[string]string{"detail": e.Detail, "hint": e.Hint}[name]
			}
			if s != have {
				diffs = append(diffs, fmt.Sprintf("%s %q, got %q", name, s, have))
			}
		case "decision":
			_ = json.Unmarshal(raw, &s)
			if s != g.decision.String() {
				diffs = append(diffs, fmt.Sprintf("decision %s, got %s", s, g.decision))
			}
		case "attempt":
			_ = json.Unmarshal(raw, &n)
			if uint64(n) != g.attempt {
				diffs = append(diffs, fmt.Sprintf("attempt %d, got %d", n, g.attempt))
			}
		case "outcome":
			_ = json.Unmarshal(raw, &s)
			if s != g.result.Outcome.String() {
				diffs = append(diffs, fmt.Sprintf("outcome %s, got %s", s, g.result.Outcome))
			}
		case "code":
			_ = json.Unmarshal(raw, &n)
			if int32(n) != g.result.Code {
				diffs = append(diffs, fmt.Sprintf("code %d, got %d", n, g.result.Code))
			}
		case "body":
			_ = json.Unmarshal(raw, &s)
			if s != string(g.result.Body) {
				diffs = append(diffs, fmt.Sprintf("body %q, got %q", s, g.result.Body))
			}
		case "count":
			_ = json.Unmarshal(raw, &n)
			if int(n) != g.count {
				diffs = append(diffs, fmt.Sprintf("count %d, got %d", n, g.count))
			}
		case "retention_s", "lease_ms", "key_retention_s":
			_ = json.Unmarshal(raw, &n)
			var have int64 = -1
			if g.policy != nil {
				have = map[string]int64{"retention_s": int64(g.policy.Retention / time.Second),
					"lease_ms":        g.policy.Lease.Milliseconds(),
					"key_retention_s": int64(g.policy.KeyRetention / time.Second)}[name]
			}
			if have != n {
				diffs = append(diffs, fmt.Sprintf("%s %d, got %d", name, n, have))
			}
		case "ran", "replayed", "takeover", "unguarded", "journaled":
			_ = json.Unmarshal(raw, &b)
			have := map[string]bool{"ran": g.ran, "replayed": g.replayed, "takeover": g.takeover,
				"unguarded": g.unguarded, "journaled": g.journaled}[name]
			if have != b {
				diffs = append(diffs, fmt.Sprintf("%s %v, got %v", name, b, have))
			}
		case "outcome_unknown": // the error's flag; false on success (docs/api.md §20)
			_ = json.Unmarshal(raw, &b)
			var e *idem.Error
			have := errors.As(g.err, &e) && e.OutcomeUnknown
			if have != b {
				diffs = append(diffs, fmt.Sprintf("outcome_unknown %v, got %v (%s %s)", b, have, code, idem.Reason(g.err)))
			}
		default:
			diffs = append(diffs, "unknown expect field "+name)
		}
	}
	return strings.Join(diffs, "; ")
}

func runScenario(sc scenario, index int) string {
	envVar := map[string]string{"": "IDEM_ADDRESS", "leader": "IDEM_ADDRESS",
		"standby": "IDEM_STANDBY_ADDRESS", "stoppable": "IDEM_STOPPABLE_ADDRESS",
		"lossy": "IDEM_LOSSY_ADDRESS"}[sc.Client]
	if envVar == "" {
		return "unknown client " + sc.Client
	}
	addr := os.Getenv(envVar)
	if addr == "" {
		return envVar + " is not set"
	}
	s := &scene{}
	o := idem.Options{Address: addr}
	if sc.Journal {
		tmp := os.Getenv("IDEM_CONFORMANCE_TMP")
		if tmp == "" {
			tmp = os.TempDir()
		}
		s.journal = filepath.Join(tmp, fmt.Sprintf("go-%d-%d.journal", os.Getpid(), index))
		_ = os.Remove(s.journal)
		o.JournalPath = s.journal
	}
	c, err := idem.Connect(o)
	if err != nil {
		return "connect: " + err.Error()
	}
	defer c.Close()
	s.c = c
	saga, err := c.BeginSaga(context.Background(), idem.SagaOptions{SagaType: "conformance"})
	if err != nil {
		return "BeginSaga: " + err.Error()
	}
	s.gid = saga.GlobalID
	bg := map[string]chan got{}
	defer func() { // never leave a background run behind
		for _, ch := range bg {
			<-ch
		}
	}()
	for i, cl := range sc.Calls {
		var g got
		switch {
		case cl.Call == "run" && cl.Background != "":
			ch := make(chan got, 1)
			bg[cl.Background] = ch
			go func(cl call) { ch <- s.run(cl) }(cl)
			continue
		case cl.Call == "join":
			ch, ok := bg[cl.Background]
			if !ok {
				return fmt.Sprintf("call %d: no background run named %s", i+1, cl.Background)
			}
			delete(bg, cl.Background)
			g = <-ch
		default:
			g = s.do(cl)
		}
		if d := check(cl.Expect, g); d != "" {
			return fmt.Sprintf("call %d (%s): %s", i+1, cl.Call, d)
		}
	}
	return ""
}

// lacks is the first capability sc needs that this runner lacks; "" none.
func lacks(sc scenario) string {
	for _, n := range sc.Needs {
		if !has[n] {
			return n
		}
	}
	return ""
}

func main() {
	dir := os.Getenv("IDEM_CONFORMANCE_DIR")
	if dir == "" {
		fmt.Fprintln(os.Stderr, "idem-conformance: IDEM_CONFORMANCE_DIR is not set (run it through client-lib/conformance/run)")
		os.Exit(2)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "scenarios.json"))
	var doc struct {
		Scenarios []scenario `json:"scenarios"`
	}
	if err == nil {
		err = json.Unmarshal(raw, &doc)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "idem-conformance: cannot read scenarios.json: %v\n", err)
		os.Exit(2)
	}
	want := map[string]bool{}
	for _, a := range os.Args[1:] {
		want[a] = true
	}
	failed := 0
	for i, sc := range doc.Scenarios {
		if len(want) > 0 && !want[sc.Name] {
			continue
		}
		if need := lacks(sc); need != "" {
			fmt.Printf("skip %s: needs %s\n", sc.Name, need)
			continue
		}
		if why := runScenario(sc, i+1); why != "" {
			fmt.Printf("not ok %s: %s\n", sc.Name, why)
			failed++
		} else {
			fmt.Printf("ok %s\n", sc.Name)
		}
	}
	if failed > 0 {
		os.Exit(1)
	}
}
