package api_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestStreamOrderOnConnectThenLive: on connect the stream sends the status,
// then the durable messages, then live events: the posted message, the
// statuses of the run, the answer's deltas (naming the id the durable
// answer then arrives with), the answer, and the final status.
func TestStreamOrderOnConnectThenLive(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	const answer = "a second answer, streamed in pieces"
	fake.Push(llmtest.Turn{Text: answer, ChunkSize: 3, ChunkDelay: 2 * time.Millisecond})
	s := newLive(t, fake)
	tok := s.token("alice")
	c := s.createChat(tok, nil)
	s.force(c.ID, []chat.Message{
		{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: "hi"}}},
		{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "first answer"}}},
	})

	st := s.watchChat(tok, c.ID, streamOpts{})
	if it := st.next(); it.Comment != "connected" {
		t.Fatalf("first item %+v, want the connected comment", it)
	}
	st.expectStatus(c.ID, chat.Waiting)
	if m := st.expectMessage(); m.Role != chat.RoleUser || textOf(m) != "hi" {
		t.Fatalf("first durable message %+v", m)
	}
	first := st.expectMessage()
	if first.Role != chat.RoleAssistant || textOf(first) != "first answer" {
		t.Fatalf("second durable message %+v", first)
	}

	s.postText(tok, c.ID, "more")
	evs := st.untilStatus(chat.Waiting)
	want := []string{"message", "status(pending)", "status(running)", "part...", "message", "status(waiting)"}
	if got := shapeOf(t, evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("live events %v, want %v", got, want)
	}
	msgs := messagesIn(t, evs)
	if msgs[0].Role != chat.RoleUser || textOf(msgs[0]) != "more" || msgs[0].ID <= first.ID {
		t.Fatalf("posted message %+v", msgs[0])
	}
	id, txt, n := streamed(t, evs)
	asst := msgs[1]
	if asst.Role != chat.RoleAssistant || asst.ID != id || textOf(asst) != answer || txt != answer {
		t.Fatalf("parts of message %d (%q, %d events); durable answer %d %q", id, txt, n, asst.ID, textOf(asst))
	}
	if n < 2 {
		t.Fatalf("%d part events: the answer was not streamed", n)
	}
	stored := s.messages(tok, c.ID)
	if len(stored) != 4 || stored[3].ID != asst.ID {
		t.Fatalf("stored history %+v", stored)
	}
}

// TestStreamResumesAfterCursor: with ?after= or Last-Event-ID, a stream
// replays only the messages after the cursor, then goes live.
func TestStreamResumesAfterCursor(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{Text: "five"}, llmtest.Turn{Text: "seven"})
	s := newLive(t, fake)
	tok := s.token("alice")
	c := s.createChat(tok, nil)
	var history []chat.Message
	for i, role := range []chat.Role{chat.RoleUser, chat.RoleAssistant, chat.RoleUser, chat.RoleAssistant} {
		history = append(history, chat.Message{Role: role, Parts: []chat.Part{{Type: chat.PartText, Text: "m" + strconv.Itoa(i+1)}}})
	}
	s.force(c.ID, history)
	stored := s.messages(tok, c.ID)
	cursor := strconv.FormatInt(stored[1].ID, 10)

	byQuery := s.watchChat(tok, c.ID, streamOpts{query: "?after=" + cursor})
	byHeader := s.watchChat(tok, c.ID, streamOpts{lastEventID: cursor})
	// ?after= wins over Last-Event-ID.
	both := s.watchChat(tok, c.ID, streamOpts{query: "?after=" + cursor, lastEventID: strconv.FormatInt(stored[3].ID, 10)})
	for _, st := range []*chatSSE{byQuery, byHeader, both} {
		st.expectStatus(c.ID, chat.Waiting)
		for _, want := range stored[2:] {
			if m := st.expectMessage(); m.ID != want.ID || textOf(m) != textOf(want) {
				t.Fatalf("replayed %d %q, want %d %q", m.ID, textOf(m), want.ID, textOf(want))
			}
		}
	}
	s.postText(tok, c.ID, "m5")
	for _, st := range []*chatSSE{byQuery, byHeader, both} {
		msgs := messagesIn(t, st.untilStatus(chat.Waiting))
		if len(msgs) != 2 || textOf(msgs[0]) != "m5" || textOf(msgs[1]) != "five" || msgs[0].ID <= stored[3].ID {
			t.Fatalf("live messages after the replay: %+v", msgs)
		}
	}

	// At the end of the history, only the status is sent, then live events.
	end := s.watchChat(tok, c.ID, streamOpts{lastEventID: strconv.FormatInt(s.messages(tok, c.ID)[5].ID, 10)})
	end.expectStatus(c.ID, chat.Waiting)
	s.postText(tok, c.ID, "m7")
	if m := end.expectMessage(); textOf(m) != "m7" {
		t.Fatalf("after a replay of nothing, got message %+v", m)
	}
	if msgs := messagesIn(t, end.untilStatus(chat.Waiting)); len(msgs) != 1 || textOf(msgs[0]) != "seven" {
		t.Fatalf("live messages %+v", msgs)
	}
}

// TestStreamJoinMidStep: a subscriber that joins while the answer streams
// gets the deltas already streamed (a snapshot from the worker), then the
// live ones, with no gap and no duplicate.
func TestStreamJoinMidStep(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	s := newLive(t, fake)
	checkJoinMidStep(t, s, s, fake, s.token("alice"))
}

// TestStreamSnapshotOfHeldStep: while the model stalls mid-answer, a new
// subscriber gets exactly what was streamed so far, from the snapshot
// alone; after an interrupt the partial answer arrives as the message the
// parts named.
func TestStreamSnapshotOfHeldStep(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	s := newLive(t, fake)
	checkHeldSnapshot(t, s, s, fake, s.token("alice"))
}

// TestStreamAcrossReplicas runs two replicas on one PostgreSQL database,
// with a worker on A only and the subscribers on B: the deltas of A's
// worker reach B's subscribers, whether they were there before the run or
// joined mid-step (they get the snapshot from A's worker).
func TestStreamAcrossReplicas(t *testing.T) {
	a, b, fake, tok := twoReplicas(t)
	t.Run("join mid-step", func(t *testing.T) { checkJoinMidStep(t, a, b, fake, tok) })
	t.Run("held step", func(t *testing.T) { checkHeldSnapshot(t, a, b, fake, tok) })
	t.Run("subscribed before the run", func(t *testing.T) { checkSubscribedBeforeRun(t, a, b, fake, tok) })
}

// checkJoinMidStep streams a slow answer from a chat whose worker runs
// behind run; one subscriber on watch is there from the start, another
// joins on watch after some deltas. Both get all the deltas exactly once,
// naming the id of the durable answer, and nothing of it after the answer.
func checkJoinMidStep(t *testing.T, run, watch *server, fake *llmtest.OpenAIChat, tok string) {
	t.Helper()
	answer := strings.Repeat("lorem ipsum ", 20)
	fake.Push(llmtest.Turn{Text: answer, ChunkSize: 4, ChunkDelay: 10 * time.Millisecond}) // 60 deltas over ~0.6 s
	c := run.createChat(tok, nil)
	early := watch.watchChat(tok, c.ID, streamOpts{})
	early.expectStatus(c.ID, chat.Waiting)
	run.postText(tok, c.ID, "go")
	parts := 0
	seen := early.until(func(ev sseEv) bool {
		if ev.Event == events.KindPart {
			parts++
		}
		return parts == 5
	})

	joiner := watch.watchChat(tok, c.ID, streamOpts{})
	joiner.expectStatus(c.ID, chat.Running)
	if m := joiner.expectMessage(); textOf(m) != "go" {
		t.Fatalf("joiner's replay: %+v", m)
	}
	joined := joiner.untilStatus(chat.Waiting)
	all := append(seen, early.untilStatus(chat.Waiting)...)
	if got := shapeOf(t, joined); !reflect.DeepEqual(got, []string{"part...", "message", "status(waiting)"}) {
		t.Fatalf("joiner's events %v", got)
	}
	final := messagesIn(t, joined)[0]
	if final.Role != chat.RoleAssistant || textOf(final) != answer {
		t.Fatalf("durable answer %+v", final)
	}
	for name, evs := range map[string][]sseEv{"early": all, "joiner": joined} {
		// The joiner subscribed after five deltas were published: it has them
		// only if the worker's snapshot reached it.
		if id, txt, _ := streamed(t, evs); id != final.ID || txt != answer {
			t.Errorf("%s subscriber: parts of message %d joined to\n%q\nwant message %d\n%q", name, id, txt, final.ID, answer)
		}
	}
}

// checkHeldSnapshot holds a chat's answer after three deltas; a subscriber
// joining on watch then gets exactly those three, from the snapshot of the
// worker behind run alone (nothing else streams), and after an interrupt
// the partial answer arrives as the message the parts named.
func checkHeldSnapshot(t *testing.T, run, watch *server, fake *llmtest.OpenAIChat, tok string) {
	t.Helper()
	// The fake sends the role chunk, then "abcd", "efgh", "ijkl", and stalls.
	const sofar = "abcdefghijkl"
	fake.Push(llmtest.Turn{Text: "abcdefghijklmnopqrstuvwxyz", ChunkSize: 4, HoldAfter: 4})
	c := run.createChat(tok, nil)
	early := watch.watchChat(tok, c.ID, streamOpts{})
	early.expectStatus(c.ID, chat.Waiting)
	run.postText(tok, c.ID, "go")
	upTo := func(st *chatSSE) []sseEv {
		var b strings.Builder
		return st.until(func(ev sseEv) bool {
			if ev.Event == events.KindPart {
				b.WriteString(decodeAs[partData](t, ev).Part.Text)
			}
			return b.String() == sofar
		})
	}
	seen := upTo(early)

	joiner := watch.watchChat(tok, c.ID, streamOpts{})
	joiner.expectStatus(c.ID, chat.Running)
	if m := joiner.expectMessage(); textOf(m) != "go" {
		t.Fatalf("joiner's replay: %+v", m)
	}
	snap := upTo(joiner)
	if got := shapeOf(t, snap); !reflect.DeepEqual(got, []string{"part..."}) {
		t.Fatalf("joiner's snapshot: %v", got)
	}

	watch.do("POST", "/api/v1/chats/"+c.ID+"/interrupt", tok, nil).expect(t, http.StatusOK, nil)
	rest := joiner.untilStatus(chat.Waiting)
	if got := shapeOf(t, rest); !reflect.DeepEqual(got, []string{"message", "status(waiting)"}) {
		t.Fatalf("joiner's events after the snapshot: %v (a duplicate delta, or more)", got)
	}
	partial := messagesIn(t, rest)[0]
	if partial.Role != chat.RoleAssistant || textOf(partial) != sofar {
		t.Fatalf("partial answer %+v, want %q", partial, sofar)
	}
	all := append(seen, early.untilStatus(chat.Waiting)...)
	for name, evs := range map[string][]sseEv{"early": all, "joiner": append(snap, rest...)} {
		if id, txt, _ := streamed(t, evs); id != partial.ID || txt != sofar {
			t.Errorf("%s subscriber: parts of message %d joined to %q, want message %d %q", name, id, txt, partial.ID, sofar)
		}
	}
}

// TestStreamActionRequired: a call of a dynamic tool streams as
// tool-call-start and argument deltas, then the answer, the
// requires_action status and an action_required event with the call.
func TestStreamActionRequired(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	const args = `{"q":"paris"}`
	fake.Push(llmtest.Turn{Text: "let me look", ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "lookup", Args: args}}, ChunkSize: 3})
	s := newLive(t, fake)
	tok := s.token("alice")
	c := s.createChat(tok, map[string]any{"dynamic_tools": []map[string]any{
		{"name": "lookup", "description": "looks things up", "input_schema": map[string]any{"type": "object"}}}})
	st := s.watchChat(tok, c.ID, streamOpts{})
	st.expectStatus(c.ID, chat.Waiting)
	s.postText(tok, c.ID, "where?")
	evs := st.untilStatus(chat.RequiresAction)
	act := decodeAs[actionData](t, st.expectEvent(events.KindActionRequired))

	want := []string{"message", "status(pending)", "status(running)", "part...", "message", "status(requires_action)"}
	if got := shapeOf(t, evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	var started []events.Delta
	var argText strings.Builder
	for _, ev := range evs {
		if ev.Event != events.KindPart {
			continue
		}
		switch d := decodeAs[partData](t, ev).Part; d.Type {
		case events.DeltaToolCallStart:
			started = append(started, d)
		case events.DeltaToolCallDelta:
			argText.WriteString(d.Text)
		}
	}
	if len(started) != 1 || started[0].ToolCallID != "call_1" || started[0].ToolName != "lookup" || argText.String() != args {
		t.Fatalf("tool call deltas: starts %+v, arguments %q", started, argText.String())
	}
	asst := messagesIn(t, evs)[1]
	if id, txt, _ := streamed(t, evs); id != asst.ID || txt != "let me look" {
		t.Fatalf("parts of message %d %q, answer %d", id, txt, asst.ID)
	}
	call := chat.ToolCall{ToolCallID: "call_1", ToolName: "lookup", Args: json.RawMessage(args)}
	if len(act.ToolCalls) != 1 || !sameCall(act.ToolCalls[0], call) {
		t.Fatalf("action_required tool calls %+v", act.ToolCalls)
	}
	if now := time.Now(); !act.Deadline.After(now) || act.Deadline.After(now.Add(time.Hour)) {
		t.Fatalf("action_required deadline %v", act.Deadline)
	}
	got := s.get(tok, c.ID)
	if got.Status != chat.RequiresAction || got.RequiredAction == nil || len(got.RequiredAction.ToolCalls) != 1 ||
		!sameCall(got.RequiredAction.ToolCalls[0], call) || !got.RequiredAction.Deadline.Equal(act.Deadline) {
		t.Fatalf("chat %+v, required action %+v", got, got.RequiredAction)
	}
}

// TestStreamRetryEvent: a 429 from the provider is retried, and the stream
// says so with a retry event before the answer.
func TestStreamRetryEvent(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{Status: http.StatusTooManyRequests, ErrorMessage: "slow down", RetryAfter: 5 * time.Millisecond}, llmtest.Turn{Text: "ok"})
	s := newLive(t, fake)
	tok := s.token("alice")
	c := s.createChat(tok, nil)
	st := s.watchChat(tok, c.ID, streamOpts{})
	st.expectStatus(c.ID, chat.Waiting)
	s.postText(tok, c.ID, "hi")
	evs := st.untilStatus(chat.Waiting)
	want := []string{"message", "status(pending)", "status(running)", "retry", "part...", "message", "status(waiting)"}
	if got := shapeOf(t, evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for _, ev := range evs {
		if ev.Event == events.KindRetry {
			r := decodeAs[events.RetryInfo](t, ev)
			// Retry-After is 5 ms; the engine's policy caps delays at 10 ms.
			if r.Attempt != 2 || r.DelayMS < 5 || r.DelayMS > 10 || !strings.Contains(r.Error, "429") || !strings.Contains(r.Error, "slow down") {
				t.Fatalf("retry event %+v", r)
			}
		}
	}
	if msgs := messagesIn(t, evs); textOf(msgs[1]) != "ok" {
		t.Fatalf("answer %+v", msgs[1])
	}
}

// TestStreamErrorEvent: a provider failure ends the run in error; the
// stream sends the error status, then an error event with the kind and
// message of the chat's last_error.
func TestStreamErrorEvent(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{Status: http.StatusBadRequest, ErrorMessage: "bad model input"})
	s := newLive(t, fake)
	tok := s.token("alice")
	c := s.createChat(tok, nil)
	st := s.watchChat(tok, c.ID, streamOpts{})
	st.expectStatus(c.ID, chat.Waiting)
	s.postText(tok, c.ID, "hi")
	evs := st.untilStatus(chat.Error)
	e := decodeAs[errorData](t, st.expectEvent(events.KindError))
	want := []string{"message", "status(pending)", "status(running)", "status(error)"}
	if got := shapeOf(t, evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	last := s.get(tok, c.ID).LastError
	if last == nil || e.Kind != last.Kind || e.Message != last.Message || !strings.Contains(e.Message, "bad model input") {
		t.Fatalf("error event %+v, last_error %+v", e, last)
	}
	if sc := decodeAs[statusData](t, evs[len(evs)-1]).Chat.LastError; sc == nil || *sc != *last {
		t.Fatalf("status event's last_error %+v, want %+v", sc, last)
	}
}

// TestStreamKeepAlive: an idle stream gets keep-alive comments.
func TestStreamKeepAlive(t *testing.T) {
	s := newSQLite(t, func(su *setup) { su.keepAlive = 20 * time.Millisecond })
	tok := s.token("alice")
	c := s.createChat(tok, nil)
	st := s.watchChat(tok, c.ID, streamOpts{})
	if it := st.next(); it.Comment != "connected" {
		t.Fatalf("first item %+v", it)
	}
	st.expectStatus(c.ID, chat.Waiting)
	for range 2 {
		if it := st.next(); it.Comment != "keep-alive" {
			t.Fatalf("got %+v, want a keep-alive comment", it)
		}
	}
}

// TestStreamRefused: another owner's chat, or no chat, is 404; no token
// is 401; a cursor that is not a message id is 400.
func TestStreamRefused(t *testing.T) {
	s := newSQLite(t)
	alice, bob := s.token("alice"), s.token("bob")
	c := s.createChat(alice, map[string]any{"message": "secret"})
	path := "/api/v1/chats/" + c.ID + "/stream"
	s.do("GET", path, bob, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("GET", "/api/v1/chats/0b7f3f0e-8a4e-4c55-9a51-2f0d5b0e1a11/stream", alice, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("GET", "/api/v1/chats/nope/stream", alice, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("GET", path, "", nil).expectError(t, http.StatusUnauthorized, "unauthorized")
	s.do("GET", path+"?after=x", alice, nil).expectError(t, http.StatusBadRequest, "invalid_query")
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Last-Event-ID", "-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res).expectError(t, http.StatusBadRequest, "invalid_query")
}

// TestStreamSlowSubscriberResyncs: a subscriber that does not keep up is
// sent resync, and its stream ends; a new connection works.
func TestStreamSlowSubscriberResyncs(t *testing.T) {
	s := newSQLite(t, func(su *setup) { su.bufferSize = 1 })
	tok := s.token("alice")
	c := s.createChat(tok, nil)
	st, resume := s.openChat(tok, c.ID, streamOpts{paused: true})
	// A burst of large messages the client does not read: the handler
	// blocks on the full connection, its subscription's buffer of one
	// overflows.
	const burst = 64 // 32 MiB: more than any socket buffers hold
	big := strings.Repeat("m", 512<<10)
	for i := range burst {
		m := chat.Message{ID: int64(1000 + i), ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: big}}}
		if err := s.ps.Publish(context.Background(), events.ChatTopic(c.ID), events.Encode(events.ChatEvent{Kind: events.KindMessage, Message: &m})); err != nil {
			t.Fatal(err)
		}
	}
	resume()
	rest := st.end()
	if len(rest) < 2 || rest[0].Event != events.KindStatus {
		t.Fatalf("events %s", kinds(rest))
	}
	last := rest[len(rest)-1]
	if last.Event != events.KindResync || last.Data != `{"kind":"resync"}` {
		t.Fatalf("last event %q %q, want resync", last.Event, last.Data)
	}
	got := rest[1 : len(rest)-1]
	for _, ev := range got {
		if ev.Event != events.KindMessage {
			t.Fatalf("unexpected %s event", ev.Event)
		}
	}
	if len(got) == burst {
		t.Fatal("every event arrived: the subscriber never lagged")
	}
	again := s.watchChat(tok, c.ID, streamOpts{})
	again.expectStatus(c.ID, chat.Waiting)
}

// shapeOf names evs in order, statuses with their status, and runs of
// part events as one "part...".
func shapeOf(t *testing.T, evs []sseEv) []string {
	t.Helper()
	var shape []string
	for _, ev := range evs {
		name := ev.Event
		switch ev.Event {
		case events.KindStatus:
			name += "(" + string(decodeAs[statusData](t, ev).Status) + ")"
		case events.KindPart:
			name = "part..."
			if len(shape) > 0 && shape[len(shape)-1] == name {
				continue
			}
		}
		shape = append(shape, name)
	}
	return shape
}

// sameCall compares tool calls, their arguments as JSON values.
func sameCall(a, b chat.ToolCall) bool {
	var x, y any
	return a.ToolCallID == b.ToolCallID && a.ToolName == b.ToolName &&
		json.Unmarshal(a.Args, &x) == nil && json.Unmarshal(b.Args, &y) == nil && reflect.DeepEqual(x, y)
}

// twoReplicas starts two replicas on a fresh PostgreSQL schema, sharing a
// fake model, with an engine on A only, and returns them with a token of
// alice's.
func twoReplicas(t *testing.T) (a, b *server, fake *llmtest.OpenAIChat, tok string) {
	t.Helper()
	dsn := pgtest.Migrated(t)
	channel := "parley_test_" + strings.ToLower(rand.Text()[:10])
	fake = llmtest.NewOpenAIChat(t)
	a = newLivePostgres(t, dsn, channel, fake)
	runEngine(t, a)
	b = newLivePostgres(t, dsn, channel, fake)
	return a, b, fake, a.token("alice")
}
