package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// TestBudgetStopsRunsOneStepPastIt runs ten chats of one owner at once,
// each held in its first model call until all ten are in it, with a token
// budget their first steps pass together. A run checks the budget before
// each model call against the usage recorded so far, so a chat whose
// first step was recorded before the others' could legitimately make a
// second call; here the tool holds every call until all ten have started
// (each chat's first answer, with its usage, is recorded before its call
// starts), so every check comes after all ten usages are recorded and no
// chat makes a second model call. Each ends in error with kind
// spend_limit, the usage of the ten steps is recorded, and once an admin
// raises the budget, retry goes on.
func TestBudgetStopsRunsOneStepPastIt(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		const chats, perStep, limit = 10, 20, 50
		h.cfg.Concurrency = chats
		// No lease may expire while the ten wait, however loaded the
		// machine: a recovered chat would make its first call again, and
		// get a second step's turn before all ten usages are recorded.
		h.cfg.LeaseTTL = time.Minute
		h.cfg.Budget = &quota.Budget{Defaults: quota.Limits{TokensPerDay: limit}}
		arrived, all := barrier(chats)
		tl, calls := addTool(t, all, arrived)

		gate := make(chan struct{})
		started := make([]chan struct{}, chats)
		for i := range started {
			started[i] = make(chan struct{})
			h.fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "add", Args: `{"a":1,"b":2}`}},
				Usage: llmtest.Usage{InputTokens: perStep / 2, OutputTokens: perStep / 2}, Gate: gate, Started: started[i]})
		}
		// What a second step of each chat would get, were it made.
		for range chats {
			h.fake.Push(llmtest.Turn{Text: "past the budget", Usage: llmtest.Usage{InputTokens: 1, OutputTokens: 1}})
		}
		ids := make([]string, chats)
		for i := range ids {
			ids[i] = h.create("add 1 and 2").ID
		}
		h.start(tl)
		for _, s := range started {
			await(t, s, "the first model call of every chat")
		}
		close(gate)

		for _, id := range ids {
			c := h.waitStatus(id, chat.Error)
			if c.LastError == nil || c.LastError.Kind != chat.KindSpendLimit {
				t.Fatalf("chat %s: last_error %+v, want kind %s", id, c.LastError, chat.KindSpendLimit)
			}
			for _, want := range []string{"day token limit of 50 tokens", "resets at", "retry"} {
				if !strings.Contains(c.LastError.Message, want) {
					t.Errorf("last_error %q does not say %q", c.LastError.Message, want)
				}
			}
			// The step that reached the budget is whole: its call ran and
			// has its result; no second answer.
			roles := ""
			for _, m := range h.history(id) {
				roles += string(m.Role) + " "
			}
			if roles != "user assistant tool " {
				t.Errorf("chat %s history %q, want user, assistant, tool", id, roles)
			}
		}
		if n := len(h.fake.Requests()); n != chats {
			t.Fatalf("the model was called %d times, want %d: a run went on past the budget", n, chats)
		}
		if n := calls.Load(); n != chats {
			t.Errorf("the tool ran %d times, want %d", n, chats)
		}
		u, err := h.st.OwnerUsage(ctx, owner, quota.Day.Start(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if got := u.InputTokens + u.OutputTokens; got != chats*perStep {
			t.Errorf("recorded usage %d tokens, want %d (every step's)", got, chats*perStep)
		}

		// Still over the budget, retry stops again before the model call.
		if _, err := h.svc.Retry(ctx, owner, ids[0]); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(ids[0], chat.Error) // Retry returned it pending
		if n := len(h.fake.Requests()); n != chats {
			t.Fatalf("a retry over the budget called the model (%d calls)", n)
		}

		raised := int64(1000)
		if err := h.st.InTx(ctx, func(tx store.Tx) error {
			return tx.SetOwnerQuotas(ctx, owner, quota.Overrides{TokensPerDay: &raised})
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Retry(ctx, owner, ids[0]); err != nil {
			t.Fatal(err)
		}
		c := h.waitStatus(ids[0], chat.Waiting)
		if c.LastError != nil {
			t.Errorf("last_error %+v after the retry", c.LastError)
		}
		msgs := h.history(ids[0])
		if last := msgs[len(msgs)-1]; last.Role != chat.RoleAssistant || last.Parts[0].Text != "past the budget" {
			t.Errorf("the retried chat ends with %+v, want the model's answer", last)
		}
	})
}

// TestBudgetStopsCompaction: a compaction is a model call too, and spend:
// a chat asked to compact over its owner's budget stops before it, and
// says to compact again.
func TestBudgetStopsCompaction(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.cfg.Budget = &quota.Budget{Defaults: quota.Limits{TokensPerDay: 10}}
	h.fake.Push(llmtest.Turn{Text: "first answer", Usage: llmtest.Usage{InputTokens: 10, OutputTokens: 10}},
		llmtest.Turn{Text: "second answer", Usage: llmtest.Usage{InputTokens: 1, OutputTokens: 1}})
	c := h.create("hello")
	h.start(nil)
	h.waitStatus(c.ID, chat.Waiting)
	// The first answer reached the budget; a second turn to summarise.
	raised := int64(1000)
	setQuotas := func(o quota.Overrides) {
		t.Helper()
		if err := h.st.InTx(ctx, func(tx store.Tx) error { return tx.SetOwnerQuotas(ctx, owner, o) }); err != nil {
			t.Fatal(err)
		}
	}
	setQuotas(quota.Overrides{TokensPerDay: &raised})
	if _, err := h.svc.PostMessage(ctx, owner, c.ID, []byte(`"more"`), ""); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(c.ID, chat.Waiting)
	setQuotas(quota.Overrides{})
	if _, err := h.svc.Compact(ctx, owner, c.ID); err != nil {
		t.Fatal(err)
	}
	got := h.waitStatus(c.ID, chat.Error)
	if got.LastError == nil || got.LastError.Kind != chat.KindSpendLimit || !strings.Contains(got.LastError.Message, "compact again") {
		t.Fatalf("last_error %+v, want spend_limit saying to compact again", got.LastError)
	}
	if n := len(h.fake.Requests()); n != 2 {
		t.Errorf("the model was called %d times, want 2 (no summarising call)", n)
	}
}

// TestBudgetStopsResumedRuns: work that resumes a run is not refused, but
// its run stops before the model call once the budget is reached, and the
// chat goes on: tool results that arrive over the budget are kept, and
// retry answers them once an override raised it.
func TestBudgetStopsResumedRuns(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.cfg.Budget = &quota.Budget{Defaults: quota.Limits{TokensPerDay: 10}}
	h.fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "w1", Name: "ask", Args: `{}`}}, Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 5}},
		llmtest.Turn{Text: "thanks", Usage: llmtest.Usage{InputTokens: 1, OutputTokens: 1}})
	c := h.create("ask me", chat.DynamicTool{Name: "ask", InputSchema: []byte(`{"type":"object"}`)})
	h.start(nil)
	h.waitStatus(c.ID, chat.RequiresAction)
	if _, err := h.svc.SubmitToolResults(ctx, owner, c.ID, []service.ToolResult{{ToolCallID: "w1", Output: []byte(`"yes"`)}}); err != nil {
		t.Fatal(err)
	}
	got := h.waitStatus(c.ID, chat.Error)
	if got.LastError == nil || got.LastError.Kind != chat.KindSpendLimit {
		t.Fatalf("last_error %+v, want spend_limit", got.LastError)
	}
	msgs := h.history(c.ID)
	if last := msgs[len(msgs)-1]; last.Role != chat.RoleTool || string(last.Parts[0].Output) != `"yes"` {
		t.Fatalf("the client's result is not the last message: %+v", last)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("the model was called %d times over the budget", n)
	}
	raised := int64(1000)
	if err := h.st.InTx(ctx, func(tx store.Tx) error {
		return tx.SetOwnerQuotas(ctx, owner, quota.Overrides{TokensPerDay: &raised})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Retry(ctx, owner, c.ID); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(c.ID, chat.Waiting)
	msgs = h.history(c.ID)
	if last := msgs[len(msgs)-1]; last.Role != chat.RoleAssistant || last.Parts[0].Text != "thanks" {
		t.Fatalf("after the retry the chat ends with %+v, want the model's answer to the result", last)
	}
}

// acquireSpy records the Acquire of every AcquireChats call.
type acquireSpy struct {
	store.Store
	asked chan store.Acquire
}

func (s *acquireSpy) AcquireChats(ctx context.Context, a store.Acquire) ([]chat.Chat, []store.Lease, error) {
	select {
	case s.asked <- a:
	default:
	}
	return s.Store.AcquireChats(ctx, a)
}

// TestAcquireAsksForMaxRunning: the engine acquires with the configured
// max_running, which the store holds each owner to.
func TestAcquireAsksForMaxRunning(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Text: "hi"})
	spy := &acquireSpy{Store: h.st, asked: make(chan store.Acquire, 100)}
	cfg := h.cfg
	cfg.Budget = &quota.Budget{Defaults: quota.Limits{MaxRunning: 3}}
	h.startOn(spy, h.ps, h.models(), nil, cfg)
	c := h.create("hello")
	h.waitStatus(c.ID, chat.Waiting)
	n := len(spy.asked) // the chat ran: at least its acquisition asked
	if n == 0 {
		t.Fatal("the chat ran without an AcquireChats call the spy saw")
	}
	for range n {
		if a := <-spy.asked; a.MaxRunning != 3 {
			t.Fatalf("AcquireChats asked with max_running %d, want 3", a.MaxRunning)
		}
	}
}

// barrier returns arrived, to call once per party, and all, closed when n
// parties have arrived.
func barrier(n int) (arrived func(), all chan struct{}) {
	all = make(chan struct{})
	var count atomic.Int64
	return func() {
		if count.Add(1) == int64(n) {
			close(all)
		}
	}, all
}
