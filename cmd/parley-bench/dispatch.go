package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// The dispatch step: 100 calls, of which every tenth goes to one of ten
// single Tools (one call each) and the others alternate between two
// sources of two tools each (45 calls per source, in one batch each).
const (
	dispatchCalls   = 100
	dispatchSingles = 10
	dispatchWarmup  = 20
)

// dispatchSchema is the tools' input schema, so every call's arguments are
// validated as a real tool's would be.
var dispatchSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)

// slowest records the longest time one tool of a step took, measured
// inside the tool.
type slowest struct{ ns atomic.Int64 }

func (s *slowest) record(d time.Duration) {
	for {
		cur := s.ns.Load()
		if int64(d) <= cur || s.ns.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// napSource is a source whose every batch sleeps d once, as a runtime that
// runs its calls concurrently would, and answers each call; it counts its
// batches and their calls.
type napSource struct {
	name    string
	tools   []string
	d       time.Duration
	slowest *slowest

	mu      sync.Mutex
	batches int
	calls   int
}

func (s *napSource) Name() string { return s.name }

func (s *napSource) Tools(context.Context) ([]tool.Decl, error) {
	decls := make([]tool.Decl, len(s.tools))
	for i, n := range s.tools {
		decls[i] = tool.Decl{Name: n, Description: "sleeps", InputSchema: dispatchSchema}
	}
	return decls, nil
}

func (s *napSource) InvokeBatch(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
	start := time.Now()
	if err := nap(ctx, s.d); err != nil {
		return nil, err
	}
	out := make([]tool.Result, len(calls))
	for i := range out {
		out[i] = tool.Text("ok")
	}
	s.mu.Lock()
	s.batches++
	s.calls += len(calls)
	s.mu.Unlock()
	s.slowest.record(time.Since(start))
	return out, nil
}

func (s *napSource) Close() error { return nil }

// counts returns and resets the batches and calls seen.
func (s *napSource) counts() (batches, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	batches, calls, s.batches, s.calls = s.batches, s.calls, 0, 0
	return batches, calls
}

// nap sleeps d or until ctx ends.
func nap(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// measureDispatch runs steps dispatcher steps of the dispatch step, every
// tool sleeping d, and returns each step's overhead, sorted: the wall time
// of Dispatcher.Run beyond the slowest tool's own time (measured inside
// the tool, so a timer firing late is not counted as overhead).
func measureDispatch(ctx context.Context, steps int, d time.Duration, log *slog.Logger) (latencies, error) {
	slow := &slowest{}
	reg := tools.NewRegistry(log)
	for i := range dispatchSingles {
		name := fmt.Sprint("t", i)
		t := tool.Func(tool.Decl{Name: name, Description: "sleeps", InputSchema: dispatchSchema},
			func(ctx context.Context, _ tool.Call) (tool.Result, error) {
				start := time.Now()
				if err := nap(ctx, d); err != nil {
					return tool.Result{}, err
				}
				slow.record(time.Since(start))
				return tool.Text("ok"), nil
			})
		if err := reg.AddTool(t); err != nil {
			return nil, fmt.Errorf("register %s: %w", name, err)
		}
	}
	sources := []*napSource{
		{name: "src_a", tools: []string{"a0", "a1"}, d: d, slowest: slow},
		{name: "src_b", tools: []string{"b0", "b1"}, d: d, slowest: slow},
	}
	for _, s := range sources {
		if err := reg.AddSource(ctx, s); err != nil {
			return nil, fmt.Errorf("register %s: %w", s.name, err)
		}
	}
	step := tools.Step{ChatID: "bench", Calls: make([]chat.ToolCall, dispatchCalls)}
	for i := range step.Calls {
		name := fmt.Sprint("t", i/10)
		if i%10 != 9 {
			k := i - i/10 // the index among the source calls
			name = fmt.Sprintf("%c%d", "ab"[k%2], k/2%2)
		}
		step.Calls[i] = chat.ToolCall{ToolCallID: fmt.Sprint("call_", i), ToolName: name, Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	d0 := tools.NewDispatcher(reg, tools.Options{}, log)

	var over latencies
	for i := range dispatchWarmup + steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		slow.ns.Store(0)
		start := time.Now()
		out := d0.Run(ctx, step)
		wall := time.Since(start)
		if err := checkDispatch(out, sources); err != nil {
			return nil, err
		}
		if i >= dispatchWarmup {
			over = append(over, wall-time.Duration(slow.ns.Load()))
		}
	}
	slices.Sort(over)
	return over, nil
}

// checkDispatch checks a step's outcome: every call answered without
// error, and each source sent exactly one batch of its 45 calls.
func checkDispatch(out tools.Outcome, sources []*napSource) error {
	if len(out.Results) != dispatchCalls || len(out.Failures) > 0 {
		return fmt.Errorf("dispatch: %d results and %d failures, want %d and 0", len(out.Results), len(out.Failures), dispatchCalls)
	}
	for _, r := range out.Results {
		if r.IsError {
			return fmt.Errorf("dispatch: call %s failed: %s", r.ToolCallID, r.Output)
		}
	}
	per := (dispatchCalls - dispatchSingles) / len(sources)
	for _, s := range sources {
		if b, c := s.counts(); b != 1 || c != per {
			return fmt.Errorf("dispatch: source %s got %d batches of %d calls in all, want 1 of %d", s.name, b, c, per)
		}
	}
	return nil
}
