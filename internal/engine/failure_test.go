package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/invariant"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// failingStore fails chosen transactions of the engine (InTx calls, counted
// from 1) with the error fail returns for that call, nil for none.
type failingStore struct {
	store.Store
	n    atomic.Int64
	fail func(n int64) error
}

func (s *failingStore) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := s.fail(s.n.Add(1)); err != nil {
		return err
	}
	return s.Store.InTx(ctx, fn)
}

// failWrites fails the writes numbered in ns with err, each once.
func failWrites(err error, ns ...int64) func(int64) error {
	return func(n int64) error {
		for _, m := range ns {
			if n == m {
				return err
			}
		}
		return nil
	}
}

// resultOf returns the result part of call id in msgs.
func resultOf(t *testing.T, msgs []chat.Message, id string) chat.Part {
	t.Helper()
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult && p.ToolCallID == id {
				return p
			}
		}
	}
	t.Fatalf("no result for %s in %+v", id, msgs)
	return chat.Part{}
}

// A step's results write fails (not a passing failure): the chat ends in
// error with the tool's real result persisted right after its call, and a
// message posted next is answered: the model gets a well-formed history.
func TestFailedResultsWriteKeepsResultsAndChatRecovers(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}},
		llmtest.Turn{Text: "back again"},
	)
	d, calls := addTool(t, nil)
	// Write 1 persists the assistant message, write 2 its results.
	fs := &failingStore{Store: h.st, fail: failWrites(errors.New("injected: disk full"), 2)}
	h.startOn(fs, h.ps, h.models(), d)
	c := h.create("add")
	failed := h.waitStatus(c.ID, chat.Error)
	if failed.LastError == nil || failed.LastError.Kind != "internal" || !strings.Contains(failed.LastError.Message, "disk full") {
		t.Fatalf("last_error %+v", failed.LastError)
	}
	if r := resultOf(t, h.history(c.ID), "c1"); r.IsError || string(r.Output) != "3" {
		t.Fatalf("the tool's real result was lost: %+v", r)
	}

	raw, _ := json.Marshal("still there?")
	if _, err := h.svc.PostMessage(context.Background(), owner, c.ID, raw, chat.BusyQueue); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(c.ID, chat.Waiting)
	if len(h.fake.Requests()) != 2 || calls.Load() != 1 {
		t.Fatalf("%d model requests, %d tool calls; want 2 and 1", len(h.fake.Requests()), calls.Load())
	}
}

// When even the failure cannot be written with the results, it is written
// without them, and the open call is answered with an outcome the model
// can trust: unknown, the tool may have run.
func TestFailureWithoutResultsSaysOutcomeUnknown(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}},
		llmtest.Turn{Text: "ok"},
	)
	d, _ := addTool(t, nil)
	// 2: the results; 3: the failure with the results.
	fs := &failingStore{Store: h.st, fail: failWrites(errors.New("injected"), 2, 3)}
	h.startOn(fs, h.ps, h.models(), d)
	c := h.create("add")
	h.waitStatus(c.ID, chat.Error)
	r := resultOf(t, h.history(c.ID), "c1")
	if !r.IsError || !strings.Contains(string(r.Output), "outcome unknown") || !strings.Contains(string(r.Output), "may have run") {
		t.Fatalf("synthetic result %s", r.Output)
	}
	if _, err := h.svc.Retry(context.Background(), owner, c.ID); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(c.ID, chat.Waiting)
}

// A passing database failure (store.ErrUnavailable) is retried: the run
// goes on as if nothing happened.
func TestUnavailableDatabaseIsRetried(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}},
		llmtest.Turn{Text: "done"},
	)
	d, calls := addTool(t, nil)
	fs := &failingStore{Store: h.st, fail: failWrites(fmt.Errorf("injected: %w", store.ErrUnavailable), 1, 2, 3)}
	h.startOn(fs, h.ps, h.models(), d)
	c := h.create("add")
	h.waitStatus(c.ID, chat.Waiting)
	if r := resultOf(t, h.history(c.ID), "c1"); r.IsError || string(r.Output) != "3" || calls.Load() != 1 {
		t.Fatalf("result %+v after %d calls", r, calls.Load())
	}
}

// A history that an older build left poisoned (a chat in error with a call
// and no result) is mended by the next user message: the call is answered
// before the message, and the model accepts the history.
func TestMessageAfterOpenCallsAnswersThemFirst(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Text: "fine"})
	ctx := context.Background()
	c := chat.Chat{ID: "poisoned", Owner: owner, Model: "fake", Title: "t", Status: chat.Pending}
	_, err := h.st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.InsertChat(ctx, &c); err != nil {
			return err
		}
		for _, m := range []chat.Message{
			{ChatID: c.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("hi")}},
			{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCallID: "c1", ToolName: "add", Args: json.RawMessage(`{}`)}}},
		} {
			if err := tx.InsertMessage(ctx, &m); err != nil {
				return err
			}
		}
		if _, err := tx.TransitionChat(ctx, c.ID, store.Transition{From: chat.Pending, To: chat.Running}); err != nil {
			return err
		}
		_, err := tx.TransitionChat(ctx, c.ID, store.Transition{From: chat.Running, To: chat.Error, LastError: &chat.ChatError{Kind: "internal", Message: "old bug"}})
		return err
	}), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	h.start(nil)
	raw, _ := json.Marshal("hello?")
	if _, err := h.svc.PostMessage(ctx, owner, c.ID, raw, chat.BusyQueue); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(c.ID, chat.Waiting)
	msgs := h.history(c.ID)
	if msgs[2].Role != chat.RoleTool || msgs[3].Role != chat.RoleUser {
		t.Fatalf("history %+v: want the call answered before the new message", msgs)
	}
}

// panicky is a provider that panics on its first call and then answers.
type panicky struct{ calls atomic.Int64 }

func (p *panicky) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	if p.calls.Add(1) == 1 {
		var history []chat.Message
		_ = history[len(history)-1] // an SDK's index out of range
	}
	return llm.Result{Parts: []chat.Part{chat.TextPart("recovered")}, FinishReason: "stop"}, nil
}

// A panic inside a run ends that chat in error (kind internal), logged with
// its stack; the engine lives on and runs the next chat.
func TestPanicEndsTheChatNotTheProcess(t *testing.T) {
	h := newHarness(t)
	p := &panicky{}
	h.startOn(h.st, h.ps, models{"fake": {Name: "fake", Provider: p, ModelID: "x"}}, nil)
	c := h.create("boom")
	failed := h.waitStatus(c.ID, chat.Error)
	if failed.LastError == nil || failed.LastError.Kind != "internal" || !strings.Contains(failed.LastError.Message, "index out of range") {
		t.Fatalf("last_error %+v", failed.LastError)
	}
	h.waitLog("run panicked", "goroutine")
	next := h.create("again")
	h.waitStatus(next.ID, chat.Waiting)
}

// A chat with nothing to answer (pending without messages) ends in error
// instead of crashing the worker.
func TestEmptyHistoryFailsTheChat(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	c := chat.Chat{ID: "empty", Owner: owner, Model: "fake", Title: "t", Status: chat.Pending}
	if err := h.st.InTx(ctx, func(tx store.Tx) error { return tx.InsertChat(ctx, &c) }); err != nil {
		t.Fatal(err)
	}
	h.start(nil)
	failed := h.waitStatus(c.ID, chat.Error)
	if failed.LastError == nil || !strings.Contains(failed.LastError.Message, "no message") {
		t.Fatalf("last_error %+v", failed.LastError)
	}
}

// flakyWake is a pubsub whose wake-up subscription the test ends, and which
// then refuses to subscribe to wake-ups again.
type flakyWake struct {
	pubsub.PubSub
	mu     sync.Mutex
	first  *endable
	broken bool
}

type endable struct {
	pubsub.Subscription
	c    chan pubsub.Message
	once sync.Once
}

func (e *endable) C() <-chan pubsub.Message { return e.c }
func (e *endable) end()                     { e.once.Do(func() { close(e.c) }) }

func (f *flakyWake) Subscribe(ctx context.Context, topic string) (pubsub.Subscription, error) {
	if topic != events.WorkTopic {
		return f.PubSub.Subscribe(ctx, topic)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first != nil {
		f.broken = true
		return nil, errors.New("injected: cannot subscribe")
	}
	sub, err := f.PubSub.Subscribe(ctx, topic)
	if err != nil {
		return nil, err
	}
	f.first = &endable{Subscription: sub, c: make(chan pubsub.Message)}
	return f.first, nil
}

// A wake-up subscription that ends and cannot be made again leaves the
// engine polling, not panicking on a nil subscription.
func TestEngineSurvivesALostWakeUpSubscription(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Text: "polled"})
	f := &flakyWake{PubSub: h.ps}
	h.startOn(h.st, f, h.models(), nil)
	waitFor(t, "the engine subscribes", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.first != nil })
	f.first.end()
	waitFor(t, "the engine tries to subscribe again", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.broken })
	c := h.create("anyone?")
	h.waitStatus(c.ID, chat.Waiting)
}

// Interrupting a requires_action chat with queued messages promotes them:
// the chat goes on to answer them instead of waiting.
func TestInterruptPromotesQueuedMessages(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "d1", Name: "dyn", Args: `{}`}}},
		llmtest.Turn{Text: "answered the queued one"},
	)
	h.start(nil)
	c := h.create("call it", chat.DynamicTool{Name: "dyn", InputSchema: json.RawMessage(`{"type":"object"}`)})
	h.waitStatus(c.ID, chat.RequiresAction)
	ctx := context.Background()
	raw, _ := json.Marshal("queued while waiting")
	res, err := h.svc.PostMessage(ctx, owner, c.ID, raw, chat.BusyQueue)
	if err != nil || res.Queued == nil {
		t.Fatalf("post: %+v %v", res, err)
	}
	after, err := h.svc.Interrupt(ctx, owner, c.ID)
	if err != nil || after.Status != chat.Pending {
		t.Fatalf("interrupt: %s %v, want pending", after.Status, err)
	}
	h.waitStatus(c.ID, chat.Waiting)
	msgs := h.history(c.ID)
	roles := ""
	for _, m := range msgs {
		roles += string(m.Role) + ","
	}
	if roles != "user,assistant,tool,user,assistant," || !strings.Contains(string(resultOf(t, msgs, "d1").Output), "cancelled") {
		t.Fatalf("history roles %s", roles)
	}
	if q, _ := h.st.ListQueued(ctx, c.ID); len(q) != 0 {
		t.Fatalf("%d messages still queued", len(q))
	}
}

// busy "interrupt" on a requires_action chat puts the older queued message
// before the new one.
func TestBusyInterruptKeepsQueuedOrder(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "d1", Name: "dyn", Args: `{}`}}},
		llmtest.Turn{Text: "both"},
	)
	h.start(nil)
	c := h.create("call it", chat.DynamicTool{Name: "dyn", InputSchema: json.RawMessage(`{"type":"object"}`)})
	h.waitStatus(c.ID, chat.RequiresAction)
	ctx := context.Background()
	for _, m := range []struct {
		text string
		busy chat.BusyMode
	}{{"older", chat.BusyQueue}, {"newer", chat.BusyInterrupt}} {
		raw, _ := json.Marshal(m.text)
		if _, err := h.svc.PostMessage(ctx, owner, c.ID, raw, m.busy); err != nil {
			t.Fatal(err)
		}
	}
	h.waitStatus(c.ID, chat.Waiting)
	var texts []string
	for _, m := range h.history(c.ID) {
		if m.Role == chat.RoleUser {
			texts = append(texts, m.Parts[0].Text)
		}
	}
	if strings.Join(texts, ",") != "call it,older,newer" {
		t.Fatalf("user messages in order %v", texts)
	}
}

// A chat created without a message gets its fallback title from the first
// message posted later, announced on the feed.
func TestFirstMessageLaterTitlesTheChat(t *testing.T) {
	h := newHarness(t)
	// The title and the answer are asked for at once, in either order:
	// both turns say the same.
	h.fake.Push(llmtest.Turn{Text: "Weather Talk"}, llmtest.Turn{Text: "Weather Talk"})
	ctx := context.Background()
	c, err := h.svc.CreateChat(ctx, owner, service.NewChat{})
	if err != nil || c.Title != "" {
		t.Fatalf("create: %+v %v", c, err)
	}
	feed, err := h.ps.Subscribe(ctx, events.FeedTopic(owner))
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Close()
	raw, _ := json.Marshal("what is the weather in Paris")
	if _, err := h.svc.PostMessage(ctx, owner, c.ID, raw, chat.BusyQueue); err != nil {
		t.Fatal(err)
	}
	got, _ := h.st.GetChat(ctx, c.ID)
	if got.Title != "what is the weather in Paris" {
		t.Fatalf("title %q", got.Title)
	}
	for m := range feed.C() {
		var ev events.FeedEvent
		if json.Unmarshal(m.Payload, &ev) == nil && ev.Kind == events.KindTitleChange {
			break
		}
	}
	// The run then generates a title from it, as for a chat created with
	// its message.
	h.start(nil)
	waitFor(t, "a generated title", func() bool { got, _ := h.st.GetChat(ctx, c.ID); return got.Title == "Weather Talk" })
	h.waitStatus(c.ID, chat.Waiting)
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stuck is a provider whose calls never answer: a worker that hangs (or is
// about to die) in the model call.
type stuck struct{ calls atomic.Int64 }

func (s *stuck) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	s.calls.Add(1)
	<-ctx.Done()
	return llm.Result{}, ctx.Err()
}

// A chat whose workers keep losing it (the lease expires, another worker
// recovers it, again and again) ends in error after MaxRecoveries instead
// of being passed on forever.
func TestChatWhoseWorkersKeepDyingEndsInError(t *testing.T) {
	h := newHarness(t, func(c *engine.Config) {
		c.LeaseTTL, c.Heartbeat, c.MaxRecoveries = 150*time.Millisecond, time.Hour, 2 // never renewed
	})
	p := &stuck{}
	h.startOn(h.st, h.ps, models{"fake": {Name: "fake", Provider: p, ModelID: "x"}}, nil)
	c := h.create("hang")
	failed := h.waitStatus(c.ID, chat.Error)
	if failed.LastError == nil || failed.LastError.Kind != "worker_died" || !strings.Contains(failed.LastError.Message, "2 times") {
		t.Fatalf("last_error %+v", failed.LastError)
	}
	// The first run, and the run after the first recovery; the run after
	// the second does not call the model.
	if n := p.calls.Load(); n != 2 {
		t.Fatalf("%d model calls, want 2", n)
	}
	if failed.LeaseRecoveries != 0 {
		t.Fatalf("LeaseRecoveries %d after the run let go, want 0", failed.LeaseRecoveries)
	}
}

// A shutdown during a step that has both a running server tool and a
// client call leaves the chat waiting for the client (requires_action),
// the server results written, not pending with the client's call open.
func TestShutdownWithAClientCallWaitsForTheClient(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}, {ID: "w1", Name: "get_weather", Args: `{}`}, {ID: "c2", Name: "slow", Args: `{}`}}},
		llmtest.Turn{Text: "done by the second engine"},
	)
	entered := make(chan struct{})
	stop := h.start(gatedTools(t, entered, make(chan struct{})))
	dyn := chat.DynamicTool{Name: "get_weather", Description: "weather", InputSchema: json.RawMessage(`{"type":"object"}`)}
	c := h.create("x", dyn)
	await(t, entered, "slow")
	stop()
	c = h.waitStatus(c.ID, chat.RequiresAction)
	if err := chat.CheckHistory(c.Status, h.history(c.ID), invariant.MayWait(c, h.history(c.ID))); err != nil {
		t.Fatalf("after shutdown: %v", err)
	}
	h.start(gatedTools(t, make(chan struct{}), nil))
	if _, err := h.svc.SubmitToolResults(context.Background(), owner, c.ID, []service.ToolResult{{ToolCallID: "w1", Output: json.RawMessage(`"sunny"`)}}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(c.ID, chat.Waiting)
	if r := resultOf(t, h.history(c.ID), "w1"); r.IsError || string(r.Output) != `"sunny"` {
		t.Fatalf("the client's result %+v", r)
	}
}

// lostCommits commits the chosen transactions (numbered from 1) and then
// reports them failed as store.ErrUnavailable: the connection was lost
// while the commit went out, so the engine cannot tell whether it took.
type lostCommits struct {
	store.Store
	n  atomic.Int64
	ns []int64
}

func (s *lostCommits) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	n := s.n.Add(1)
	err := s.Store.InTx(ctx, fn)
	if err == nil && slices.Contains(s.ns, n) {
		return fmt.Errorf("injected: connection lost during COMMIT: %w", store.ErrUnavailable)
	}
	return err
}

// TestCommitOfUnknownOutcomeIsNotMadeTwice: a write that committed but was
// reported lost is found in the database before it is tried again, so it
// is neither made twice (the retry would meet its own message ids) nor
// taken for a lost lease: each write of a step, in turn.
func TestCommitOfUnknownOutcomeIsNotMadeTwice(t *testing.T) {
	for n, write := range []string{1: "the answer with its call", 2: "the call's result", 3: "the last answer and the end of the run"} {
		if write == "" {
			continue
		}
		t.Run(write, func(t *testing.T) {
			h := newHarness(t)
			h.fake.Push(
				llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}},
				llmtest.Turn{Text: "three"},
			)
			d, calls := addTool(t, nil)
			h.startOn(&lostCommits{Store: h.st, ns: []int64{int64(n)}}, h.ps, h.models(), d)
			c := h.create("add")
			h.waitStatus(c.ID, chat.Waiting)
			h.waitLog("a write whose commit was not confirmed is in the database")
			var shape []string
			for _, m := range h.history(c.ID) {
				shape = append(shape, string(m.Role))
			}
			if strings.Join(shape, " ") != "user assistant tool assistant" || calls.Load() != 1 {
				t.Fatalf("history %v after %d tool calls; want user assistant tool assistant, 1 call", shape, calls.Load())
			}
		})
	}
}

// TestUnconfirmedStatusChangeIsNotALostLease: the write that only moves the
// chat to requires_action commits but is reported lost; the run finds the
// change made and does not take it for a lost lease.
func TestUnconfirmedStatusChangeIsNotALostLease(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "ask", Args: `{}`}}})
	h.startOn(&lostCommits{Store: h.st, ns: []int64{2}}, h.ps, h.models(), nil)
	c := h.create("ask", chat.DynamicTool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)})
	h.waitStatus(c.ID, chat.RequiresAction)
	h.waitLog("a write whose commit was not confirmed is in the database")
	h.logs.mu.Lock()
	defer h.logs.mu.Unlock()
	for _, r := range h.logs.recs {
		if strings.Contains(r, "lease lost") {
			t.Fatalf("the run took its own write for a lost lease: %s", r)
		}
	}
}

// TestFailedEndKeepsTheAnswer: the write that ends a run with the model's
// answer fails (not a passing failure): the chat ends in error with the
// answer, its usage and its cost recorded, not without them.
func TestFailedEndKeepsTheAnswer(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Text: "an answer worth keeping", Usage: llmtest.Usage{InputTokens: 100, OutputTokens: 20}})
	fs := &failingStore{Store: h.st, fail: failWrites(errors.New("injected: disk full"), 1)}
	h.startOn(fs, h.ps, h.models(), nil)
	c := h.create("hello")
	failed := h.waitStatus(c.ID, chat.Error)
	if failed.LastError == nil || !strings.Contains(failed.LastError.Message, "disk full") {
		t.Fatalf("last_error %+v", failed.LastError)
	}
	msgs := h.history(c.ID)
	last := msgs[len(msgs)-1]
	if last.Role != chat.RoleAssistant || last.Parts[0].Text != "an answer worth keeping" || last.Usage == nil || last.Usage.InputTokens != 100 {
		t.Fatalf("the last message is %+v, want the answer with its usage", last)
	}
	if failed.Usage.InputTokens != 100 || failed.Usage.OutputTokens != 20 || failed.Usage.CostMicros == 0 {
		t.Fatalf("the chat's usage %+v, want the answer's (100 in, 20 out, a cost)", failed.Usage)
	}
}

// TestWhatModelsAndToolsProduceIsStored: a model that writes U+0000 and a
// call whose arguments nest deeper than any store keeps, then a tool whose
// output holds U+0000: the run goes on, the text is stored with U+FFFD in
// place of U+0000, the tool runs with the arguments as stored, and the
// over-deep call is answered as invalid arguments without running.
func TestWhatModelsAndToolsProduceIsStored(t *testing.T) {
	h := newHarness(t)
	deep := strings.Repeat(`{"a":`, 1100) + "1" + strings.Repeat("}", 1100)
	h.fake.Push(
		llmtest.Turn{Text: "nul:\x00:", ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "echo", Args: deep}, {ID: "c2", Name: "echo", Args: `{"s":"x\u0000y"}`}}},
		llmtest.Turn{Text: "done"},
	)
	var runs atomic.Int64
	reg := tools.NewRegistry(nil)
	echo := tool.Func(tool.Decl{Name: "echo", Description: "echoes s"},
		func(ctx context.Context, c tool.Call) (tool.Result, error) {
			runs.Add(1)
			var in struct{ S string }
			_ = json.Unmarshal(c.Args, &in)
			return tool.Text("got " + in.S + "\x00"), nil
		})
	if err := reg.AddTool(echo); err != nil {
		t.Fatal(err)
	}
	h.start(tools.NewDispatcher(reg, tools.Options{}, nil))
	c := h.create("go")
	h.waitStatus(c.ID, chat.Waiting)
	msgs := h.history(c.ID)
	if got := msgs[1].Parts[0].Text; got != "nul:\uFFFD:" {
		t.Fatalf("stored text %q, want U+0000 replaced", got)
	}
	if args := string(msgs[1].Parts[1].Args); args != "{}" {
		t.Fatalf("stored arguments of the over-deep call: %.40s…, want {}", args)
	}
	if r := resultOf(t, msgs, "c1"); !r.IsError || !strings.Contains(string(r.Output), "nested deeper than") {
		t.Fatalf("the over-deep call's result: %s", r.Output)
	}
	// The tool ran with the arguments as stored (U+FFFD in place of the
	// model's U+0000), and its own U+0000 was replaced.
	if r := resultOf(t, msgs, "c2"); r.IsError || string(r.Output) != "\"got x\uFFFDy\\ufffd\"" {
		t.Fatalf("the tool's output %s, want U+0000 replaced", r.Output)
	}
	if runs.Load() != 1 {
		t.Fatalf("the tool ran %d times, want once (not for the over-deep call)", runs.Load())
	}
}

// hungStore is a database that stops answering writes once hang is closed:
// a transaction waits until its context ends.
type hungStore struct {
	store.Store
	hang    chan struct{}
	waiting atomic.Int64 // transactions waiting
}

func (s *hungStore) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	select {
	case <-s.hang:
		s.waiting.Add(1)
		defer s.waiting.Add(-1)
		<-ctx.Done()
		return fmt.Errorf("hung database: %w", ctx.Err())
	default:
		return s.Store.InTx(ctx, fn)
	}
}

// TestHungDatabaseBoundsEveryWriteAndShutdown: with the database hanging,
// the writes that end three runs each give up after the write timeout, at
// the same time rather than one after another, and shutdown does not wait
// longer than that; once the database answers again the chats run again
// (their leases expire) and end as they should.
func TestHungDatabaseBoundsEveryWriteAndShutdown(t *testing.T) {
	h := newHarness(t, func(c *engine.Config) { c.WriteTimeout, c.LeaseTTL = 500*time.Millisecond, 500*time.Millisecond })
	gate := make(chan struct{})
	h.fake.Push(
		llmtest.Turn{Text: "one"}, llmtest.Turn{Text: "two"}, llmtest.Turn{Text: "three"},
		llmtest.Turn{Text: "one again"}, llmtest.Turn{Text: "two again"}, llmtest.Turn{Text: "three again"},
	)
	hs := &hungStore{Store: h.st, hang: gate}
	close(gate) // every write hangs
	stop := h.startOn(hs, h.ps, h.models(), nil)
	var chats []chat.Chat
	for range 3 {
		chats = append(chats, h.create("hello"))
	}
	waitFor(t, "three end writes waiting on the hung database", func() bool { return hs.waiting.Load() == 3 })
	start := time.Now()
	stop()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown took %v with the database hung; each write is bounded by 500ms", took)
	}
	h.waitLog("letting go of the chat until its lease expires")
	h.start(nil) // the database answers again
	for _, c := range chats {
		h.waitStatus(c.ID, chat.Waiting)
	}
}

// unreachedThenRecovered fails the first transaction with
// store.ErrUnavailable before it runs anything, and meanwhile hands the
// chat back to pending as a recovery would (its lease generation kept).
type unreachedThenRecovered struct {
	store.Store
	chatID string
	once   sync.Once
}

func (s *unreachedThenRecovered) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return s.Store.InTx(ctx, fn)
	}
	if err := s.Store.InTx(ctx, func(tx store.Tx) error {
		_, err := tx.TransitionChat(ctx, s.chatID, store.Transition{From: chat.Running, To: chat.Pending})
		return err
	}); err != nil {
		return err
	}
	return fmt.Errorf("injected: connection refused: %w", store.ErrUnavailable)
}

// TestUnreachedWriteIsNotTakenForCommitted: a write that failed before it
// ran anything cannot have committed, even when the chat is meanwhile in a
// status that write would have left it in: the run does not take it for
// done (nor panic on the notice it never made), and its fence then finds
// the chat gone.
func TestUnreachedWriteIsNotTakenForCommitted(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Text: "answered by the next run"})
	c := h.create("hello")
	if err := h.st.InTx(context.Background(), func(tx store.Tx) error { return tx.SetInterruptRequested(context.Background(), c.ID, true) }); err != nil {
		t.Fatal(err)
	}
	h.startOn(&unreachedThenRecovered{Store: h.st, chatID: c.ID}, h.ps, h.models(), nil)
	h.waitLog("lease lost")
	h.logs.mu.Lock()
	defer h.logs.mu.Unlock()
	for _, r := range h.logs.recs {
		if strings.Contains(r, "panicked") || strings.Contains(r, "commit was not confirmed") {
			t.Fatalf("the run took a write that never ran for committed: %s", r)
		}
	}
}
