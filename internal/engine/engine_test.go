package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/store"
)

func TestTextAnswerEndsWaitingWithUsageAndCost(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Reasoning: "think", Text: "Hello there", Usage: llmtest.Usage{InputTokens: 1000, OutputTokens: 500}})
	h.start(nil)
	c := h.create("hi")
	c = h.waitStatus(c.ID, chat.Waiting)

	msgs := h.history(c.ID)
	if len(msgs) != 2 || msgs[1].Role != chat.RoleAssistant {
		t.Fatalf("history: %+v", msgs)
	}
	var text string
	for _, p := range msgs[1].Parts {
		if p.Type == chat.PartText {
			text += p.Text
		}
	}
	if text != "Hello there" {
		t.Fatalf("assistant text %q", text)
	}
	// Prices in the harness: 1 per Mtok in, 2 out: 1000*1 + 500*2 = 2000 micro-units.
	want := chat.Usage{InputTokens: 1000, OutputTokens: 500, CostMicros: 2000}
	if msgs[1].Usage == nil || *msgs[1].Usage != want || c.Usage != want {
		t.Fatalf("usage: message %+v, chat %+v, want %+v", msgs[1].Usage, c.Usage, want)
	}
	if c.WorkerID != "" {
		t.Fatalf("a waiting chat keeps worker %q", c.WorkerID)
	}
}

func TestServerToolLoopAndResultsReachTheModel(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}, {ID: "c2", Name: "add", Args: `{"a":3,"b":4}`}}},
		llmtest.Turn{Text: "3 and 7"},
	)
	d, _ := addTool(t, nil)
	h.start(d)
	c := h.create("add things")
	h.waitStatus(c.ID, chat.Waiting)

	reqs := h.waitRequests(2)
	body := string(reqs[1].Body)
	for _, want := range []string{`"tool_call_id":"c1"`, `"tool_call_id":"c2"`, `"content":"3"`, `"content":"7"`} {
		if !strings.Contains(strings.ReplaceAll(body, " ", ""), want) {
			t.Errorf("second request lacks %s: %s", want, body)
		}
	}
	msgs := h.history(c.ID)
	if len(msgs) != 4 || msgs[2].Role != chat.RoleTool || len(msgs[2].Parts) != 2 || msgs[2].Parts[0].ToolCallID != "c1" {
		t.Fatalf("history: %+v", msgs)
	}
}

// TestDynamicToolRequiresActionThenDeadlineResumes: a step mixing a server
// tool with dynamic ones runs the server call and lets the chat wait for
// the client's results; when nobody answers before the deadline, the open
// calls get "no result before deadline" error results and the model's next
// request carries every result right after its assistant message, in call
// order.
func TestDynamicToolRequiresActionThenDeadlineResumes(t *testing.T) {
	h := newHarness(t, func(c *engine.Config) { c.ToolResultTimeout = time.Millisecond })
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{
			{ID: "w1", Name: "get_weather", Args: `{"city":"Paris"}`},
			{ID: "a1", Name: "add", Args: `{"a":1,"b":1}`},
			{ID: "w2", Name: "get_weather", Args: `{"city":"Rome"}`},
		}},
		llmtest.Turn{Text: "no weather today"},
	)
	d, _ := addTool(t, nil)
	expire := make(chan struct{}) // the deadline passes at once; the engine handles it once this is closed
	h.startOn(heldDeadlines{h.st, expire}, h.ps, h.models(), d)
	dyn := chat.DynamicTool{Name: "get_weather", Description: "weather", InputSchema: json.RawMessage(`{"type":"object"}`)}
	c := h.create("weather?", dyn)

	// The chat waits for the client, with a deadline and no worker, for the
	// dynamic calls only, in call order; the server call's result is
	// already written.
	c = h.waitStatus(c.ID, chat.RequiresAction)
	if c.ActionDeadline == nil || c.WorkerID != "" {
		t.Fatalf("requires_action chat: deadline %v, worker %q", c.ActionDeadline, c.WorkerID)
	}
	var waitsFor []string
	for _, call := range chat.OfKind(chat.PendingActions(h.history(c.ID), c.DynamicTools), chat.ActionClient) {
		waitsFor = append(waitsFor, call.ToolCallID)
	}
	wantMessages(t, "calls the chat waits for", waitsFor, "w1", "w2")
	msgs := h.history(c.ID)
	if last := msgs[len(msgs)-1]; last.Role != chat.RoleTool || len(last.Parts) != 1 || last.Parts[0].ToolCallID != "a1" {
		t.Fatalf("server result of the step: %+v", last)
	}

	// Nobody answers: the deadline is handled, synthetic results let the
	// model react.
	close(expire)
	h.waitStatus(c.ID, chat.Waiting)
	reqs := h.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	wantMessages(t, "the model's request after the deadline", wireMessages(t, reqs[1]),
		"user:weather?",
		"assistant:->w1,a1,w2",
		"tool[w1]:error: no result before deadline",
		"tool[a1]:2",
		"tool[w2]:error: no result before deadline",
	)
	// Stored: the server result, then the deadline's, each message in call
	// order.
	msgs = h.history(c.ID)
	if len(msgs) != 5 {
		t.Fatalf("history: %+v", msgs)
	}
	var stored []string
	for _, m := range msgs[2:4] {
		var ids []string
		for _, p := range m.Parts {
			if m.Role != chat.RoleTool || p.Type != chat.PartToolResult {
				t.Fatalf("message %d is not tool results: %+v", m.ID, m)
			}
			ids = append(ids, fmt.Sprintf("%s=%s", p.ToolCallID, p.Output))
		}
		stored = append(stored, strings.Join(ids, " "))
	}
	wantMessages(t, "stored results", stored,
		`a1=2`,
		`w1="no result before deadline" w2="no result before deadline"`,
	)
	if msgs[4].Role != chat.RoleAssistant || msgs[4].Parts[0].Text != "no weather today" {
		t.Fatalf("last message: %+v", msgs[4])
	}
}

func TestProviderErrorEndsInErrorAndRetryContinues(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Status: http.StatusBadRequest, ErrorMessage: "bad model input"}, llmtest.Turn{Text: "fine now"})
	h.start(nil)
	c := h.create("hi")
	c = h.waitStatus(c.ID, chat.Error)
	if c.LastError == nil || c.LastError.HTTPStatus != 400 || c.LastError.Provider != "openai" || c.LastError.Retryable {
		t.Fatalf("last_error: %+v", c.LastError)
	}
	if _, err := h.svc.Retry(context.Background(), owner, c.ID); err != nil {
		t.Fatal(err)
	}
	c = h.waitStatus(c.ID, chat.Waiting)
	if c.LastError != nil {
		t.Fatalf("last_error kept after a good run: %+v", c.LastError)
	}
}

func TestRateLimitIsRetriedWithRetryEvent(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Status: http.StatusTooManyRequests, ErrorMessage: "slow down", RetryAfter: time.Millisecond}, llmtest.Turn{Text: "ok"})
	c := h.create("hi")
	evs := h.subscribe(c.ID)
	h.start(nil)
	h.waitStatus(c.ID, chat.Waiting)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-evs:
			if ev.Kind == events.KindRetry {
				if ev.Retry.Attempt != 2 || !strings.Contains(ev.Retry.Error, "429") {
					t.Fatalf("retry event %+v", ev.Retry)
				}
				return
			}
		case <-deadline:
			t.Fatal("no retry event")
		}
	}
}

func TestMaxStepsEndsInError(t *testing.T) {
	h := newHarness(t, func(c *engine.Config) { c.MaxSteps = 3 })
	for i := range 3 {
		h.fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c" + string(rune('a'+i)), Name: "add", Args: `{}`}}})
	}
	d, _ := addTool(t, nil)
	h.start(d)
	c := h.create("loop forever")
	c = h.waitStatus(c.ID, chat.Error)
	if c.LastError == nil || c.LastError.Kind != "max_steps" {
		t.Fatalf("last_error %+v", c.LastError)
	}
	if n := len(h.fake.Requests()); n != 3 {
		t.Fatalf("%d model calls, want 3", n)
	}
}

// TestQueuedMessagesArePromotedInOrder: messages posted while the model
// call is in progress are queued, then promoted in the order they were
// posted once the answer is written, and the next model call answers them.
func TestQueuedMessagesArePromotedInOrder(t *testing.T) {
	h := newHarness(t)
	started, gate := make(chan struct{}), make(chan struct{})
	h.fake.Push(llmtest.Turn{Text: "first answer", Started: started, Gate: gate}, llmtest.Turn{Text: "second answer"})
	h.start(nil)
	c := h.create("one")
	await(t, started, "the first model call")
	// The call is held on the gate: the chat is running until it is opened.
	if got, err := h.st.GetChat(context.Background(), c.ID); err != nil || got.Status != chat.Running {
		t.Fatalf("chat during the model call: %+v %v", got, err)
	}
	for _, m := range []string{"two", "three"} {
		raw, _ := json.Marshal(m)
		res, err := h.svc.PostMessage(context.Background(), owner, c.ID, raw, chat.BusyQueue)
		if err != nil || res.Queued == nil {
			t.Fatalf("post %s: %+v %v", m, res, err)
		}
	}
	close(gate)
	h.waitStatus(c.ID, chat.Waiting)

	var got []string
	for _, m := range h.history(c.ID) {
		got = append(got, fmt.Sprintf("%s:%s", m.Role, m.Parts[0].Text))
	}
	wantMessages(t, "history", got, "user:one", "assistant:first answer", "user:two", "user:three", "assistant:second answer")
	reqs := h.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	wantMessages(t, "the second model call", wireMessages(t, reqs[1]), "user:one", "assistant:first answer", "user:two", "user:three")
}

// TestInterruptCancelsTheCallAndKeepsPartialOutput: an interrupt during a
// model call that would never end by itself (the fake holds it on a gate
// that is never opened, after part of the answer was streamed) cancels the
// call, keeps the streamed part as the assistant's answer, and answers the
// interrupting message.
func TestInterruptCancelsTheCallAndKeepsPartialOutput(t *testing.T) {
	h := newHarness(t)
	gone := make(chan struct{})
	// Events: the role chunk, "partial ", "words th"; then the gate.
	h.fake.Push(
		llmtest.Turn{Text: "partial words then more", ChunkSize: 8, Gate: make(chan struct{}), GateAfter: 3, Gone: gone},
		llmtest.Turn{Text: "answer to the interrupt"},
	)
	c := h.create("tell me a long story")
	evs := h.subscribe(c.ID)
	h.start(nil)
	// Wait until everything before the gate was streamed, so the partial
	// output is known.
	const partial = "partial words th"
	var streamed string
	deadline := time.After(10 * time.Second)
	for streamed != partial {
		select {
		case ev := <-evs:
			if ev.Kind == events.KindPart {
				for _, d := range ev.Parts.Deltas {
					streamed += d.Text
				}
				if !strings.HasPrefix(partial, streamed) {
					t.Fatalf("streamed %q past the gate, want %q", streamed, partial)
				}
			}
		case <-deadline:
			t.Fatalf("streamed %q, want %q", streamed, partial)
		}
	}
	raw, _ := json.Marshal("stop, answer this instead")
	if _, err := h.svc.PostMessage(context.Background(), owner, c.ID, raw, chat.BusyInterrupt); err != nil {
		t.Fatal(err)
	}
	// Only a cancellation ends the held call: the fake saw its client go.
	await(t, gone, "the interrupted model call to be cancelled")
	h.waitStatus(c.ID, chat.Waiting)

	var got []string
	for _, m := range h.history(c.ID) {
		if len(m.Parts) != 1 || m.Parts[0].Type != chat.PartText {
			t.Fatalf("message %d: %+v", m.ID, m.Parts)
		}
		got = append(got, fmt.Sprintf("%s:%s", m.Role, m.Parts[0].Text))
	}
	wantMessages(t, "history", got,
		"user:tell me a long story",
		"assistant:"+partial,
		"user:stop, answer this instead",
		"assistant:answer to the interrupt",
	)
	reqs := h.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	wantMessages(t, "the model call after the interrupt", wireMessages(t, reqs[1]),
		"user:tell me a long story", "assistant:"+partial, "user:stop, answer this instead")
}

func TestShutdownHandsTheChatBack(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Text: "never finishes at all", ChunkSize: 4, HoldAfter: 3}, llmtest.Turn{Text: "done by the second engine"})
	stop := h.start(nil)
	c := h.create("hi")
	evs := h.subscribe(c.ID)
	deadline := time.After(5 * time.Second)
wait:
	for { // some of the answer was streamed: a partial answer exists
		select {
		case ev := <-evs:
			if ev.Kind == events.KindPart {
				break wait
			}
		case <-deadline:
			t.Fatal("no part event")
		}
	}
	stop()
	c = h.waitStatus(c.ID, chat.Pending)
	if len(h.history(c.ID)) != 1 {
		t.Fatalf("a handed-back step wrote messages: %+v", h.history(c.ID))
	}
	h.start(nil)
	h.waitStatus(c.ID, chat.Waiting)
	if msgs := h.history(c.ID); len(msgs) != 2 || msgs[1].Parts[0].Text != "done by the second engine" {
		t.Fatalf("history %+v", msgs)
	}
}

// TestWakeUpsAreNeverLost: with the fallback poll out of the picture, every
// chat made pending the moment the previous run ended (as a client that
// answers at once does) is picked up by its wake-up alone.
func TestWakeUpsAreNeverLost(t *testing.T) {
	h := newHarness(t, func(c *engine.Config) { c.PollInterval = time.Hour })
	const n = 200
	for range n {
		h.fake.Push(llmtest.Turn{Text: "ok"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feed, err := h.ps.Subscribe(ctx, events.FeedTopic(owner))
	if err != nil {
		t.Fatal(err)
	}
	h.start(nil)
	for i := range n {
		c := h.create(fmt.Sprintf("message %d", i))
		timeout := time.After(3 * time.Second)
	wait: // the next chat is created as soon as this one's run ended
		for {
			select {
			case m := <-feed.C():
				var ev events.FeedEvent
				if json.Unmarshal(m.Payload, &ev) == nil && ev.Chat.ID == c.ID && ev.Chat.Status == chat.Waiting {
					break wait
				}
			case <-timeout:
				t.Fatalf("chat %d not answered within 3s: its wake-up was lost", i)
			}
		}
	}
}

// TestLongHistoryReachesTheModelWhole: the history read with the acquisition
// stops at a page; a run whose history is longer reads on, so the model
// gets every message, in order.
func TestLongHistoryReachesTheModelWhole(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Text: "done"})
	c := h.create("m0") // pending; no engine runs yet
	const n = 251       // past the first page and ListMessages' page, ending with a user message
	_, err := h.st.InTx(context.Background(), func(tx store.Tx) error {
		for i := 1; i < n; i++ {
			role := chat.RoleAssistant
			if i%2 == 0 {
				role = chat.RoleUser
			}
			m := chat.Message{ChatID: c.ID, Role: role, Parts: []chat.Part{chat.TextPart(fmt.Sprintf("m%d", i))}}
			if err := tx.InsertMessage(context.Background(), &m); err != nil {
				return err
			}
		}
		return nil
	}), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	h.start(nil)
	h.waitStatus(c.ID, chat.Waiting)
	var req struct {
		Messages []struct {
			Content any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(h.waitRequests(1)[0].Body, &req); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range req.Messages {
		if s, ok := m.Content.(string); ok {
			got = append(got, s)
		}
	}
	if len(got) != n {
		t.Fatalf("the model got %d text messages, want %d", len(got), n)
	}
	for i, s := range got {
		if want := fmt.Sprintf("m%d", i); s != want {
			t.Fatalf("message %d the model got is %q, want %q", i, s, want)
		}
	}
}

// TestUsageOfEveryStepReachesTheChat: a run of two steps (a tool call, then
// a text) adds both answers' usage to the chat, the first in the write that
// persists the call, the second with the end of the run.
func TestUsageOfEveryStepReachesTheChat(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}, Usage: llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Turn{Text: "3", Usage: llmtest.Usage{InputTokens: 200, OutputTokens: 20}},
	)
	d, _ := addTool(t, nil)
	h.start(d)
	c := h.waitStatus(h.create("add").ID, chat.Waiting)
	// Prices in the harness: 1 per Mtok in, 2 out.
	want := chat.Usage{InputTokens: 300, OutputTokens: 30, CostMicros: 300 + 60}
	if c.Usage != want {
		t.Fatalf("chat usage %+v, want %+v", c.Usage, want)
	}
	var sum chat.Usage
	for _, m := range h.history(c.ID) {
		if m.Usage != nil {
			sum = sum.Add(*m.Usage)
		}
	}
	if sum != want {
		t.Fatalf("messages' usage sums to %+v, want %+v", sum, want)
	}
}

// TestRepeatedCallIDsAreMadeUnique: a model that numbers its calls per
// answer ("c1" in every step, twice in one answer) gets a history where
// every call has its own id and its own result; the model reads those ids.
func TestRepeatedCallIDsAreMadeUnique(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}, {ID: "c1", Name: "add", Args: `{"a":3,"b":4}`}}},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":5,"b":6}`}}},
		llmtest.Turn{Text: "3, 7 and 11"},
	)
	d, calls := addTool(t, nil)
	h.start(d)
	c := h.create("add three times")
	h.waitStatus(c.ID, chat.Waiting)
	msgs := h.history(c.ID)
	want := map[string]string{"c1": "3", "c1_2": "7", "c1_3": "11"}
	for id, out := range want {
		if r := resultOf(t, msgs, id); r.IsError || string(r.Output) != out {
			t.Fatalf("result of %s: %s, want %s", id, r.Output, out)
		}
	}
	if calls.Load() != 3 {
		t.Fatalf("%d tool calls, want 3", calls.Load())
	}
	if body := string(h.waitRequests(3)[2].Body); !strings.Contains(body, `"c1_3"`) || !strings.Contains(body, `"c1_2"`) {
		t.Fatalf("the model's last request does not carry the new ids: %s", body)
	}
}

// TestRequiresActionStatusCarriesTheAction: the status event that tells a
// chat's stream it waits carries what it waits for (the web UI builds its
// forms from it), with the deadline.
func TestRequiresActionStatusCarriesTheAction(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "ask", Args: `{"q":"?"}`}}})
	c := h.create("ask me", chat.DynamicTool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)})
	evs := h.subscribe(c.ID) // before the engine starts: no event is missed
	h.start(nil)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-evs:
			if ev.Kind != events.KindStatus || ev.Chat == nil || ev.Chat.Status != chat.RequiresAction {
				continue
			}
			ra := ev.Chat.RequiredAction
			if ra == nil || len(ra.ToolCalls) != 1 || ra.ToolCalls[0].ToolCallID != "c1" || ra.Deadline.IsZero() {
				t.Fatalf("the requires_action status event carries %+v, want the call c1 and a deadline", ra)
			}
			return
		case <-deadline:
			t.Fatal("no requires_action status event")
		}
	}
}

// TestCallsAreAnnouncedAsStored: a client call whose id holds U+0000 (which
// no store keeps, and which a client may not send back) is announced with
// the id it is stored with, so the client can answer it.
func TestCallsAreAnnouncedAsStored(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c\x001", Name: "ask", Args: `{}`}}})
	c := h.create("ask me", chat.DynamicTool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)})
	evs := h.subscribe(c.ID)
	h.start(nil)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-evs:
			if ev.Kind != events.KindActionRequired {
				continue
			}
			stored := h.history(c.ID)[1].Parts[0].ToolCallID
			if len(ev.ToolCalls) != 1 || ev.ToolCalls[0].ToolCallID != stored || stored != "c\uFFFD1" {
				t.Fatalf("announced %+v, stored id %q; want the stored id c\\uFFFD1 announced", ev.ToolCalls, stored)
			}
			return
		case <-deadline:
			t.Fatal("no action_required event")
		}
	}
}
