package client_test

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/client"
)

// answeredStatus serves every request to path with the API itself and
// records the status of its answer on the returned channel.
func (s *server) answeredStatus(path string) <-chan int {
	codes := make(chan int, 10)
	s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != path {
			return false
		}
		rec := httptest.NewRecorder()
		s.api.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		codes <- rec.Code
		return true
	})
	return codes
}

// chatWithTurns creates a chat and answers each message in turn with the
// echo model; it returns the chat, waiting, and its messages.
func chatWithTurns(t *testing.T, c *client.Client, msgs ...string) (client.Chat, []client.Message) {
	t.Helper()
	ctx := testCtx(t)
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Message: msgs[0]})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	for _, m := range msgs[1:] {
		if _, err := c.PostMessage(ctx, ch.ID, client.PostMessageRequest{Content: m}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, c, ch.ID, client.StatusWaiting)
	}
	all, err := c.AllMessages(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2*len(msgs) {
		t.Fatalf("%d messages after %d turns: %+v", len(all), len(msgs), all)
	}
	got, err := c.GetChat(ctx, ch.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got, all
}

// texts is the role and text of each message, with a mark on superseded
// ones and the source of compactions.
func texts(msgs []client.Message) []string {
	var out []string
	for _, m := range msgs {
		s := m.Role + ": " + m.Text()
		if len(m.Parts) == 1 && m.Parts[0].Type == client.PartCompaction {
			s = m.Role + ": compaction " + m.Parts[0].Source
		}
		if m.Superseded {
			s += " (superseded)"
		}
		out = append(out, s)
	}
	return out
}

// TestCompact: a chat of two turns shows its context; Compact answers 202
// with the chat pending, whose run writes a compaction message and waits
// again; then there is nothing left to compact (409), and neither is there
// in a chat of one turn. A busy chat is a status conflict.
func TestCompact(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, before := chatWithTurns(t, c, "first question", "second question")
	if ch.Context == nil || ch.Context.Window != 100_000 || ch.Context.Tokens <= 0 || ch.Context.Percent < 0 {
		t.Fatalf("context %+v, want the tokens against the window of 100000", ch.Context)
	}

	codes := s.answeredStatus("/api/v1/chats/" + ch.ID + "/compact")
	got, err := c.Compact(ctx, ch.ID)
	if err != nil || got.ID != ch.ID || got.Status != client.StatusPending {
		t.Fatalf("compact: %+v, %v", got, err)
	}
	if code := <-codes; code != http.StatusAccepted {
		t.Errorf("compact answered %d, want 202", code)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	msgs, err := c.AllMessages(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(before)+1 {
		t.Fatalf("messages after the compaction %q, want one more than %q", texts(msgs), texts(before))
	}
	last := msgs[len(msgs)-1]
	if last.Role != client.RoleAssistant || len(last.Parts) != 1 {
		t.Fatalf("last message %+v, want the compaction", last)
	}
	p := last.Parts[0]
	if p.Type != client.PartCompaction || p.Source != client.CompactManual || p.Summary == "" || p.TokensBefore <= 0 ||
		p.ContextWindow != 100_000 || p.ThroughMessageID != before[1].ID {
		t.Errorf("compaction part %+v, want a manual summary through message %d (the first answer)", p, before[1].ID)
	}

	_, err = c.Compact(ctx, ch.ID)
	apiError(t, err, http.StatusConflict, "nothing_to_compact")
	one, _ := chatWithTurns(t, c, "only question")
	_, err = c.Compact(ctx, one.ID)
	apiError(t, err, http.StatusConflict, "nothing_to_compact")

	busy, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: []client.DynamicTool{weatherTool}, Message: `/call get_weather {"city":"Oslo"}`})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, busy.ID, client.StatusRequiresAction)
	_, err = c.Compact(ctx, busy.ID)
	if ae := apiError(t, err, http.StatusConflict, "status_conflict"); ae.Details["status"] != client.StatusRequiresAction {
		t.Errorf("details %+v", ae.Details)
	}
}

// TestEditMessage: editing the user message has it answered again; the old
// answer is superseded, left out of the history unless asked for with
// IncludeSuperseded. Only a user message of the history can be edited.
func TestEditMessage(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, msgs := chatWithTurns(t, c, "first", "second")

	got, err := c.EditMessage(ctx, ch.ID, msgs[2].ID, "second, edited")
	if err != nil || got.Status != client.StatusPending {
		t.Fatalf("edit: %+v, %v", got, err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	now, err := c.AllMessages(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user: first", "assistant: echo: first", "user: second, edited", "assistant: echo: second, edited"}
	if !reflect.DeepEqual(texts(now), want) {
		t.Errorf("history %q, want %q", texts(now), want)
	}
	every, err := c.AllMessages(ctx, ch.ID, 0, client.IncludeSuperseded())
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"user: first", "assistant: echo: first", "user: second (superseded)", "assistant: echo: second (superseded)", "user: second, edited", "assistant: echo: second, edited"}
	if !reflect.DeepEqual(texts(every), want) {
		t.Errorf("history with the superseded %q, want %q", texts(every), want)
	}
	page, err := c.ListMessages(ctx, ch.ID, msgs[2].ID, 1, client.IncludeSuperseded())
	if err != nil || len(page) != 1 || page[0].ID != msgs[3].ID || !page[0].Superseded || page[0].ParentID == nil || *page[0].ParentID != msgs[2].ID {
		t.Errorf("a page of one after message %d with the superseded: %+v, %v", msgs[2].ID, page, err)
	}
	versions, err := c.MessageVersions(ctx, ch.ID, now[2].ID)
	if err != nil || len(versions) != 2 || versions[0].ID != msgs[2].ID || versions[0].Text() != "second" || !versions[0].Superseded || versions[1].ID != now[2].ID {
		t.Errorf("the versions of the edited message: %+v, %v", versions, err)
	}

	// Text parts as content, like a posted message.
	if _, err := c.EditMessage(ctx, ch.ID, msgs[0].ID, []client.Part{{Type: client.PartText, Text: "first, again"}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	now, err = c.AllMessages(ctx, ch.ID, 0)
	if want := []string{"user: first, again", "assistant: echo: first, again"}; err != nil || !reflect.DeepEqual(texts(now), want) {
		t.Errorf("history %q, %v; want %q", texts(now), err, want)
	}

	_, err = c.EditMessage(ctx, ch.ID, now[1].ID, "not mine")
	apiError(t, err, http.StatusBadRequest, "not_a_user_message")
	_, err = c.EditMessage(ctx, ch.ID, msgs[2].ID, "superseded now")
	apiError(t, err, http.StatusNotFound, "message_not_found")
	_, err = c.EditMessage(ctx, ch.ID, 1<<40, "nowhere")
	apiError(t, err, http.StatusNotFound, "message_not_found")
}

// TestRegenerate: the last answer is superseded and written again; a chat
// at work cannot be regenerated.
func TestRegenerate(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, msgs := chatWithTurns(t, c, "hello")

	got, err := c.Regenerate(ctx, ch.ID)
	if err != nil || got.Status != client.StatusPending {
		t.Fatalf("regenerate: %+v, %v", got, err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	now, err := c.AllMessages(ctx, ch.ID, 0)
	if err != nil || len(now) != 2 || now[1].ID <= msgs[1].ID || now[1].Text() != "echo: hello" || now[1].Superseded {
		t.Fatalf("history %+v, %v; want a new answer after message %d", now, err, msgs[1].ID)
	}
	every, err := c.AllMessages(ctx, ch.ID, 0, client.IncludeSuperseded())
	if want := []string{"user: hello", "assistant: echo: hello (superseded)", "assistant: echo: hello"}; err != nil || !reflect.DeepEqual(texts(every), want) {
		t.Errorf("history with the superseded %q, %v; want %q", texts(every), err, want)
	}

	busy, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: []client.DynamicTool{weatherTool}, Message: `/call get_weather {"city":"Oslo"}`})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, busy.ID, client.StatusRequiresAction)
	_, err = c.Regenerate(ctx, busy.ID)
	apiError(t, err, http.StatusConflict, "status_conflict")
}

// TestFork: a fork at an answer copies the history up to it and waits; a
// fork at a user message answers it; the original is unchanged. A fork
// point between a tool call and its result is refused, and so is an
// unknown message.
func TestFork(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, msgs := chatWithTurns(t, c, "one", "two")

	codes := s.answeredStatus("/api/v1/chats/" + ch.ID + "/fork")
	fork, err := c.Fork(ctx, ch.ID, msgs[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if code := <-codes; code != http.StatusCreated {
		t.Errorf("fork answered %d, want 201", code)
	}
	if fork.ID == ch.ID || fork.Status != client.StatusWaiting || fork.Model != ch.Model || fork.Labels[client.LabelForkedFrom] != ch.ID {
		t.Fatalf("fork %+v, want a waiting copy labelled forked_from %s", fork, ch.ID)
	}
	copied, err := c.AllMessages(ctx, fork.ID, 0)
	if want := []string{"user: one", "assistant: echo: one"}; err != nil || !reflect.DeepEqual(texts(copied), want) {
		t.Errorf("fork's history %q, %v; want %q", texts(copied), err, want)
	}

	atUser, err := c.Fork(ctx, ch.ID, msgs[2].ID)
	if err != nil || atUser.Status != client.StatusPending {
		t.Fatalf("fork at a user message: %+v, %v", atUser, err)
	}
	waitStatus(t, c, atUser.ID, client.StatusWaiting)
	copied, err = c.AllMessages(ctx, atUser.ID, 0)
	if want := []string{"user: one", "assistant: echo: one", "user: two", "assistant: echo: two"}; err != nil || !reflect.DeepEqual(texts(copied), want) {
		t.Errorf("fork's history %q, %v; want %q", texts(copied), err, want)
	}
	orig, err := c.AllMessages(ctx, ch.ID, 0)
	if err != nil || !reflect.DeepEqual(orig, msgs) {
		t.Errorf("the original's history changed: %q, %v", texts(orig), err)
	}

	_, err = c.Fork(ctx, ch.ID, 1<<40)
	apiError(t, err, http.StatusNotFound, "message_not_found")

	step, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: []client.DynamicTool{weatherTool}, Message: `/call get_weather {"city":"Oslo"}`})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, step.ID, client.StatusRequiresAction)
	stepMsgs, err := c.AllMessages(ctx, step.ID, 0)
	if err != nil || len(stepMsgs) != 2 || stepMsgs[1].Parts[len(stepMsgs[1].Parts)-1].Type != client.PartToolCall {
		t.Fatalf("messages of the chat waiting for a result: %+v, %v", stepMsgs, err)
	}
	_, err = c.Fork(ctx, step.ID, stepMsgs[1].ID)
	apiError(t, err, http.StatusBadRequest, "fork_inside_step")
}

// TestStreamHistoryEvent: an edit shows on the chat's stream as a history
// event superseding the edited message and what followed, then its new
// version and the new answer follow as messages.
func TestStreamHistoryEvent(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, msgs := chatWithTurns(t, c, "before")
	st, err := c.Stream(ctx, ch.ID, msgs[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs := events(st)
	until(t, evs, statusIs(client.StatusWaiting))
	if _, err := c.EditMessage(ctx, ch.ID, msgs[0].ID, "after"); err != nil {
		t.Fatal(err)
	}
	got := until(t, evs, func(ev client.ChatEvent) bool { return ev.Kind == client.EventHistory })
	h := got[len(got)-1]
	if h.SupersededAfter != msgs[0].ID-1 || h.Message != nil {
		t.Fatalf("history event %+v, want the messages after %d superseded", h, msgs[0].ID-1)
	}
	got = until(t, evs, func(ev client.ChatEvent) bool { return ev.Kind == client.EventMessage })
	if m := got[len(got)-1].Message; m.Role != client.RoleUser || m.Text() != "after" || m.ID <= msgs[1].ID {
		t.Errorf("message after the history event %+v, want the edited message's new version", m)
	}
	got = until(t, evs, func(ev client.ChatEvent) bool { return ev.Kind == client.EventMessage })
	if m := got[len(got)-1].Message; m.Role != client.RoleAssistant || m.Text() != "echo: after" || m.ID <= msgs[1].ID {
		t.Errorf("message after the edit %+v, want the new answer", m)
	}
}
