package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
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

// effectTool is a registry with one tool, "effect", that counts its runs;
// when gate is not nil the first run signals entered and waits on gate.
func effectTool(t *testing.T, entered chan<- struct{}, gate <-chan struct{}) (*tools.Dispatcher, *atomic.Int64) {
	t.Helper()
	runs := &atomic.Int64{}
	reg := tools.NewRegistry(nil)
	effect := tool.Func(tool.Decl{Name: "effect", Description: "an effect that must not happen twice"},
		func(ctx context.Context, c tool.Call) (tool.Result, error) {
			if runs.Add(1) == 1 && gate != nil {
				close(entered)
				<-gate // the worker is gone meanwhile: its lease expires
			}
			return tool.Text("done"), nil
		})
	if err := reg.AddTool(effect); err != nil {
		t.Fatal(err)
	}
	return tools.NewDispatcher(reg, tools.Options{}, nil), runs
}

// approvedEffect makes a chat whose model calls "effect" (approval
// needed), runs it to requires_action on an engine of its own that then
// stops, and approves the call: the chat is pending, for the engine the
// test starts next.
func (h *harness) approvedEffect(d *tools.Dispatcher) chat.Chat {
	h.t.Helper()
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "effect", Args: `{}`}}},
		llmtest.Turn{Text: "after the effect"},
	)
	stop := h.start(d)
	c := h.createApproving("do it", "effect")
	h.waitStatus(c.ID, chat.RequiresAction)
	stop()
	if _, err := h.svc.SubmitApprovals(context.Background(), service.Decider{Owner: owner, Token: "t"}, c.ID,
		[]service.Decision{{ToolCallID: "c1", Approve: true}}); err != nil {
		h.t.Fatal(err)
	}
	return c
}

// TestApprovedCallRunsAtMostOnceWhenItsWorkerDies: a worker that dies while
// an approved call runs (its lease is never renewed, and the call holds on
// a gate) leaves the call to the worker that recovers the chat, which
// answers it "outcome unknown" and does not run it a second time.
func TestApprovedCallRunsAtMostOnceWhenItsWorkerDies(t *testing.T) {
	h := newHarness(t)
	entered, gate := make(chan struct{}), make(chan struct{})
	d, runs := effectTool(t, entered, gate)
	c := h.approvedEffect(d)
	if runs.Load() != 0 {
		t.Fatal("the call ran before its approval")
	}
	dying := h.cfg
	dying.LeaseTTL, dying.Heartbeat = 300*time.Millisecond, time.Hour // never renewed
	h.startOn(h.st, h.ps, h.models(), d, dying)
	await(t, entered, "the approved call")
	h.waitStatus(c.ID, chat.Waiting) // recovered, answered, and the model called again
	close(gate)
	if n := runs.Load(); n != 1 {
		t.Fatalf("the approved call ran %d times, want once", n)
	}
	r := resultOf(t, h.history(c.ID), "c1")
	if !r.IsError || !strings.Contains(string(r.Output), chat.ReasonUnknownOutcome) {
		t.Fatalf("result %s (error %v), want the outcome-unknown result", r.Output, r.IsError)
	}
}

// deadStore is the store of a process that hangs for good at a
// transaction (the first after the first live ones): from then on nothing
// it asks of the database gets an answer (until the test ends, when it
// gets an error).
type deadStore struct {
	store.Store
	live atomic.Int64 // transactions that still go through
	once sync.Once
	died chan struct{} // closed at the transaction that hangs
	end  chan struct{} // closed when the test ends
}

func newDeadStore(t *testing.T, st store.Store, live int64) *deadStore {
	s := &deadStore{Store: st, died: make(chan struct{}), end: make(chan struct{})}
	s.live.Store(live)
	t.Cleanup(func() { close(s.end) })
	return s
}

var errDead = errors.New("this process is dead")

func (s *deadStore) hang() error {
	s.once.Do(func() { close(s.died) })
	<-s.end
	return errDead
}

func (s *deadStore) InTx(ctx context.Context, fn func(store.Tx) error) error {
	if s.live.Add(-1) >= 0 {
		return s.Store.InTx(ctx, fn)
	}
	return s.hang()
}
func (s *deadStore) RenewLease(context.Context, store.Lease, time.Duration) (bool, error) {
	return false, s.hang()
}
func (s *deadStore) AcquireChats(ctx context.Context, a store.Acquire) ([]chat.Chat, []store.Lease, error) {
	select {
	case <-s.died:
		return nil, nil, s.hang()
	default:
		return s.Store.AcquireChats(ctx, a)
	}
}
func (s *deadStore) RecoverExpiredLeases(ctx context.Context, count bool) ([]string, error) {
	select {
	case <-s.died:
		return nil, s.hang()
	default:
		return s.Store.RecoverExpiredLeases(ctx, count)
	}
}

// TestApprovedCallRunsWhenItsWorkerDiesBeforeStartingIt: a worker that
// takes an approved chat and dies before the call starts (its first write,
// the call's started mark, never commits) leaves a call that never ran: the
// worker that recovers the chat runs it, once, and the model reads its real
// result, not "outcome unknown".
func TestApprovedCallRunsWhenItsWorkerDiesBeforeStartingIt(t *testing.T) {
	h := newHarness(t)
	d, runs := effectTool(t, nil, nil)
	c := h.approvedEffect(d)
	dead := newDeadStore(t, h.st, 0)
	dying := h.cfg
	dying.LeaseTTL = 300 * time.Millisecond
	h.startOn(dead, h.ps, h.models(), d, dying)
	await(t, dead.died, "the first worker's first write")
	h.start(d) // recovers the chat once the dead worker's lease expires
	h.waitStatus(c.ID, chat.Waiting)
	if n := runs.Load(); n != 1 {
		t.Fatalf("the approved call ran %d times, want once", n)
	}
	r := resultOf(t, h.history(c.ID), "c1")
	if r.IsError || string(r.Output) != `"done"` {
		t.Fatalf("result %s (error %v), want the call's own result", r.Output, r.IsError)
	}
	if got := h.history(c.ID); got[len(got)-1].Parts[0].Text != "after the effect" {
		t.Fatalf("the chat ends with %+v, want the model's answer after the effect", got[len(got)-1])
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

// TestClientCallsWaitAgainWhenTheirWorkerDies: a worker dies after it
// stored the model's call of a dynamic tool and before the chat waited for
// it: nobody ever saw the call, so the worker that recovers the chat waits
// for it as the step would have, instead of answering it "outcome
// unknown".
func TestClientCallsWaitAgainWhenTheirWorkerDies(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "ask", Args: `{}`}}})
	c := h.create("ask", chat.DynamicTool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)})
	dead := newDeadStore(t, h.st, 1) // the answer with its call is stored; the wait is not
	dying := h.cfg
	dying.LeaseTTL = 300 * time.Millisecond
	h.startOn(dead, h.ps, h.models(), nil, dying)
	await(t, dead.died, "the write that makes the chat wait")
	h.start(nil)
	got := h.waitStatus(c.ID, chat.RequiresAction)
	if ra := got.RequiredAction; ra != nil && (len(ra.ToolCalls) != 1 || ra.ToolCalls[0].ToolCallID != "c1") {
		t.Fatalf("the chat waits for %+v, want c1", ra.ToolCalls)
	}
	for _, m := range h.history(c.ID) {
		if m.Role == chat.RoleTool {
			t.Fatalf("the unseen client call was answered: %+v", m)
		}
	}
}

// TestUndecidedApprovalsWaitAgainWhenTheirWorkerDies: a worker dies after
// it stored the model's call of a tool that needs approval and before the
// chat waited for a decision: the call never ran, so the worker that
// recovers the chat waits for the decision, and the tool runs only once
// approved.
func TestUndecidedApprovalsWaitAgainWhenTheirWorkerDies(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}},
		llmtest.Turn{Text: "3"},
	)
	d, calls := addTool(t, nil)
	c := h.createApproving("add", "add")
	dead := newDeadStore(t, h.st, 1) // the answer with its call is stored; the wait is not
	dying := h.cfg
	dying.LeaseTTL = 300 * time.Millisecond
	h.startOn(dead, h.ps, h.models(), d, dying)
	await(t, dead.died, "the write that makes the chat wait")
	h.start(d)
	h.waitStatus(c.ID, chat.RequiresAction)
	if calls.Load() != 0 {
		t.Fatal("the undecided call ran")
	}
	if _, err := h.svc.SubmitApprovals(context.Background(), service.Decider{Owner: owner, Token: "t"}, c.ID,
		[]service.Decision{{ToolCallID: "c1", Approve: true}}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(c.ID, chat.Waiting)
	if r := resultOf(t, h.history(c.ID), "c1"); r.IsError || string(r.Output) != "3" || calls.Load() != 1 {
		t.Fatalf("result %s after %d runs, want 3 after one", r.Output, calls.Load())
	}
}

// TestToolThatKillsItsWorkersEndsTheChat: a tool that never returns, on
// workers whose leases expire while it runs (each worker seems to die in
// it), is tried again by each next worker only until Config.MaxRecoveries:
// then the chat ends in error (worker_died), and retry is the way on.
// The answer written before the tool runs does not count as a finished
// step.
func TestToolThatKillsItsWorkersEndsTheChat(t *testing.T) {
	h := newHarness(t, func(c *engine.Config) {
		c.LeaseTTL, c.Heartbeat, c.MaxRecoveries = 200*time.Millisecond, time.Hour, 2
	})
	for range 5 {
		h.fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "stuck", Args: `{}`}}})
	}
	var runs atomic.Int64
	reg := tools.NewRegistry(nil)
	stuck := tool.Func(tool.Decl{Name: "stuck", Description: "never returns"},
		func(ctx context.Context, c tool.Call) (tool.Result, error) {
			runs.Add(1)
			<-ctx.Done()
			return tool.Result{}, ctx.Err()
		})
	if err := reg.AddTool(stuck); err != nil {
		t.Fatal(err)
	}
	h.start(tools.NewDispatcher(reg, tools.Options{}, nil))
	c := h.create("go")
	got := h.waitStatus(c.ID, chat.Error)
	if got.LastError == nil || got.LastError.Kind != "worker_died" {
		t.Fatalf("last_error %+v, want worker_died", got.LastError)
	}
	// Once per worker that reached it: at most MaxRecoveries (fewer when a
	// slow machine lets a lease expire during a model call).
	if n := runs.Load(); n < 1 || n > 2 {
		t.Fatalf("the tool ran %d times, want 1 or 2 (MaxRecoveries 2)", n)
	}
}
