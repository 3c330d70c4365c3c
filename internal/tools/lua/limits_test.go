package lua

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	glua "github.com/yuin/gopher-lua"

	"github.com/parleyhq/parley/tool"
)

const runawayScript = `
local n = 0
tool{name = "count", handler = function() n = n + 1; return n end}
tool{name = "spin", handler = function() while true do end end}
tool{name = "spin_pcall", handler = function()
  while true do pcall(function() while true do end end) end
end}
tool{name = "spin_xpcall", handler = function()
  while true do xpcall(function() while true do end end, function(e) return e end) end
end}
tool{name = "spin_coroutine", handler = function()
  while true do coroutine.resume(coroutine.create(function() while true do end end)) end
end}
tool{name = "nap", handler = function(input) sleep(input.s); return "rested" end}
tool{name = "block", handler = function() n = n + 1; block_in_go(); return "unblocked" end}
`

func TestRunawayIsStoppedAndStateRebuilt(t *testing.T) {
	var logs logBuffer
	m := NewMetrics()
	s := openSource(t, runawayScript, func(o *Options) {
		o.CallTimeout = 200 * time.Millisecond
		o.Metrics = m
		o.Logger = logs.logger()
	})
	okJSON(t, invokeOne(t, s, "count", `{}`))
	for i, spin := range []string{"spin", "spin_pcall", "spin_xpcall", "spin_coroutine"} {
		if got := okJSON(t, invokeOne(t, s, "count", `{}`)); got != "2" {
			t.Fatalf("%s: count before = %s, want 2", spin, got)
		}
		start := time.Now()
		msg := errText(t, invokeOne(t, s, spin, `{}`))
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s was stopped after %s, limit 200ms", spin, took)
		}
		for _, want := range []string{"limit of 200ms", "still running Lua code", "rebuilt"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q lacks %q", spin, msg, want)
			}
		}
		if got := counterValue(t, m.runaways.WithLabelValues("test")); got != float64(i+1) {
			t.Errorf("%s: runaways metric = %v, want %d", spin, got, i+1)
		}
		// The source keeps serving, on a state rebuilt from the scripts.
		if got := okJSON(t, invokeOne(t, s, "count", `{}`)); got != "1" {
			t.Fatalf("%s: count after = %s, want 1 (rebuilt state)", spin, got)
		}
	}
	if !strings.Contains(logs.String(), "Lua call stopped while running") {
		t.Errorf("the runaway was not logged:\n%s", logs.String())
	}
}

// TestCallsInFlightFinishOnTheOldState stops a runaway while another
// call waits: the rebuilt state takes new calls, and the waiting call
// finishes on the state it started in.
func TestCallsInFlightFinishOnTheOldState(t *testing.T) {
	var logs logBuffer
	s := openSource(t, runawayScript+`
tool{name = "count_then_nap", handler = function(input)
  n = n + 1
  log.info("napping")
  sleep(input.s)
  return n
end}`, func(o *Options) { o.Logger = logs.logger() })
	okJSON(t, invokeOne(t, s, "count", `{}`)) // n = 1 on the first state

	napped := make(chan tool.Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		res, err := s.InvokeBatch(ctx, []tool.Call{newCall("nap", "count_then_nap", `{"s":0.1}`)})
		if err != nil {
			t.Error(err)
		}
		napped <- res[0]
	}()
	waitFor(t, func() bool { return strings.Contains(logs.String(), "napping") })

	// spin holds the loop until its batch's limit (its context's deadline).
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	res, err := s.InvokeBatch(ctx, []tool.Call{newCall("b", "spin", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if msg := errText(t, res[0]); !strings.Contains(msg, "rebuilt") {
		t.Errorf("spin: %s", msg)
	}
	if got := okJSON(t, <-napped); got != "2" {
		t.Errorf("the waiting call returned n = %s, want 2 (its own, old state)", got)
	}
	if got := okJSON(t, invokeOne(t, s, "count", `{}`)); got != "1" {
		t.Errorf("a new call: n = %s, want 1 (the rebuilt state)", got)
	}
}

// waitFor polls cond until it holds, failing the test after the deadline.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatal("condition not met before the deadline")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestBatchTimeLimit(t *testing.T) {
	s := openSource(t, runawayScript, func(o *Options) {
		o.CallTimeout = 10 * time.Second
		o.BatchTimeout = 300 * time.Millisecond
	})
	res := invoke(t, s, newCall("a", "nap", `{"s":5}`), newCall("b", "nap", `{"s":0}`))
	if msg := errText(t, res[0]); !strings.Contains(msg, "this step's calls") || strings.Contains(msg, "rebuilt") {
		t.Errorf("a waiting call past the batch limit: %q", msg)
	}
	if got := okJSON(t, res[1]); got != `"rested"` {
		t.Errorf("the quick call: %s", got)
	}
	msg := errText(t, invokeOne(t, s, "spin", `{}`))
	if !strings.Contains(msg, "this step's calls") || !strings.Contains(msg, "rebuilt") {
		t.Errorf("a running call past the batch limit: %q", msg)
	}
}

func TestCancelledCallsEndAtOnce(t *testing.T) {
	s := openSource(t, runawayScript)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	res, err := s.InvokeBatch(ctx, []tool.Call{newCall("a", "nap", `{"s":10}`)})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("cancelled after %s", took)
	}
	if msg := errText(t, res[0]); !strings.Contains(msg, "cancelled") {
		t.Errorf("cancelled call: %q", msg)
	}
	if got := okJSON(t, invokeOne(t, s, "count", `{}`)); got != "1" {
		t.Errorf("after a cancel: count = %s", got)
	}
}

// TestStuckStateIsAbandoned covers code a context cannot interrupt (a Go
// function that never returns in time): past the deadline and a grace
// period, the batch answers, and the source serves on a rebuilt state.
func TestStuckStateIsAbandoned(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	s := openSource(t, runawayScript, func(o *Options) {
		o.CallTimeout = 100 * time.Millisecond
		o.hooks = map[string]glua.LGFunction{"block_in_go": func(*glua.LState) int {
			select {
			case <-release:
			case <-time.After(deadline):
			}
			return 0
		}}
	})
	s.stuckAfter = 200 * time.Millisecond
	start := time.Now()
	msg := errText(t, invokeOne(t, s, "block", `{}`))
	if !strings.Contains(msg, "stuck") {
		t.Errorf("stuck call: %q", msg)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the stuck call answered after %s", took)
	}
	if got := okJSON(t, invokeOne(t, s, "count", `{}`)); got != "1" {
		t.Errorf("after abandoning: count = %s, want 1 (rebuilt state)", got)
	}
}

func TestLoadTimeLimit(t *testing.T) {
	path := writeFile(t, t.TempDir(), "slow.lua", "while true do end")
	_, err := Open("slow", path, Options{LoadTimeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "load time limit") {
		t.Fatalf("Open: %v", err)
	}
}

// counterValue reads a counter.
func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestBatchTimeoutCoversTheSourcesOwn: parley waits for a Lua batch longer
// than the source's own batch limit, which ends the batch by itself with a
// result per call, so a long limit is not cut short by the dispatcher's
// default.
func TestBatchTimeoutCoversTheSourcesOwn(t *testing.T) {
	s := openSource(t, runawayScript, func(o *Options) { o.BatchTimeout = 5 * time.Minute })
	var bt tool.BatchTimeouter = s
	if got := bt.BatchTimeout(100); got <= 5*time.Minute {
		t.Fatalf("BatchTimeout = %v, want more than the source's 5m", got)
	}
}
