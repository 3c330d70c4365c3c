package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// createApproving makes a chat whose calls of the tools approve matches
// wait for a person's decision.
func (h *harness) createApproving(msg string, approve ...string) chat.Chat {
	h.t.Helper()
	raw, _ := json.Marshal(msg)
	c, err := h.svc.CreateChat(context.Background(), owner, service.NewChat{Message: raw, Title: "test chat", Approve: approve})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// TestApprovedCallRunsAtMostOnceWhenItsWorkerDies: a worker that dies while
// an approved call runs (its lease is never renewed, and the call holds on
// a gate) leaves the call to the worker that recovers the chat, which
// answers it "outcome unknown" and does not run it a second time.
func TestApprovedCallRunsAtMostOnceWhenItsWorkerDies(t *testing.T) {
	h := newHarness(t, func(c *engine.Config) {
		c.LeaseTTL, c.Heartbeat = 300*time.Millisecond, time.Hour // never renewed
	})
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "effect", Args: `{}`}}},
		llmtest.Turn{Text: "I could not tell whether it ran"},
	)
	var runs atomic.Int64
	entered, gate := make(chan struct{}), make(chan struct{})
	reg := tools.NewRegistry(nil)
	effect := tool.Func(tool.Decl{Name: "effect", Description: "an effect that must not happen twice"},
		func(ctx context.Context, c tool.Call) (tool.Result, error) {
			if runs.Add(1) == 1 {
				close(entered)
				<-gate // the worker is gone meanwhile: its lease expires
			}
			return tool.Text("done"), nil
		})
	if err := reg.AddTool(effect); err != nil {
		t.Fatal(err)
	}
	h.start(tools.NewDispatcher(reg, tools.Options{}, nil))
	c := h.createApproving("do it", "effect")
	h.waitStatus(c.ID, chat.RequiresAction)
	if runs.Load() != 0 {
		t.Fatal("the call ran before its approval")
	}
	if _, err := h.svc.SubmitApprovals(context.Background(), service.Decider{Owner: owner, Token: "t"}, c.ID,
		[]service.Decision{{ToolCallID: "c1", Approve: true}}); err != nil {
		t.Fatal(err)
	}
	await(t, entered, "the approved call")
	h.waitStatus(c.ID, chat.Waiting) // recovered, answered, and the model called again
	close(gate)
	if n := runs.Load(); n != 1 {
		t.Fatalf("the approved call ran %d times, want once", n)
	}
	r := resultOf(t, h.history(c.ID), "c1")
	if !r.IsError || !strings.Contains(string(r.Output), service.ReasonUnknownOutcome) {
		t.Fatalf("result %s (error %v), want the outcome-unknown result", r.Output, r.IsError)
	}
}

// TestUndecidedApprovalIsDeniedAtTheDeadline: nobody decides before the
// deadline, so the call is denied and the model is told so.
func TestUndecidedApprovalIsDeniedAtTheDeadline(t *testing.T) {
	h := newHarness(t, func(c *engine.Config) { c.ToolResultTimeout = 200 * time.Millisecond })
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}},
		llmtest.Turn{Text: "nobody said yes"},
	)
	d, calls := addTool(t, nil)
	h.start(d)
	c := h.createApproving("add", "a*")
	h.waitStatus(c.ID, chat.Waiting)
	if calls.Load() != 0 {
		t.Fatal("the undecided call ran")
	}
	r := resultOf(t, h.history(c.ID), "c1")
	if !r.IsError || string(r.Output) != `"denied: no decision before deadline"` {
		t.Fatalf("result %s", r.Output)
	}
	if body := string(h.waitRequests(2)[1].Body); !strings.Contains(body, "denied: no decision before deadline") {
		t.Fatalf("the model was not told: %s", body)
	}
}
