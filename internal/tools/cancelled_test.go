package tools

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/tool"
)

// TestCancelledStepStartsNoTool: a step whose context is done before its
// calls start runs none of them (the pool has room, but a call must not
// start once the step was cancelled), and says they were not executed.
func TestCancelledStepStartsNoTool(t *testing.T) {
	var ran atomic.Int64
	counting := echoTool("count", func(context.Context) error { ran.Add(1); return nil })
	d := NewDispatcher(newRegistry(t, []tool.Tool{counting}), Options{}, discard())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 50 { // the pool's room and the done context are both ready: every time
		out := d.Run(ctx, Step{Calls: []chat.ToolCall{call("c1", "count", 1)}})
		if len(out.Results) != 1 || !strings.HasPrefix(errorText(t, out.Results[0]), "not executed: cancelled") {
			t.Fatalf("results %+v", out.Results)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("a cancelled step started the tool %d times", n)
	}
}

// TestCancelledStepStartsNoBatch: the same for a source: a step cancelled
// before its batch starts sends the source nothing, and its calls say they
// were not executed (not that they were cut while they ran).
func TestCancelledStepStartsNoBatch(t *testing.T) {
	src := newFakeSource("src", "lookup")
	d := NewDispatcher(newRegistry(t, nil, src), Options{}, discard())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := d.Run(ctx, Step{Calls: []chat.ToolCall{call("c1", "lookup", 1), call("c2", "lookup", 2)}})
	if len(out.Results) != 2 || len(out.Failures) != 0 {
		t.Fatalf("results %+v, failures %v", out.Results, out.Failures)
	}
	for _, r := range out.Results {
		if msg := errorText(t, r); !strings.HasPrefix(msg, "not executed: cancelled") {
			t.Fatalf("result %q, want not executed", msg)
		}
	}
	if got := src.recorded(); len(got) != 0 {
		t.Fatalf("the source got batches %v from a cancelled step", got)
	}
}
