package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// postResult is the body of POST /messages.
type postResult struct {
	Message *chat.Message       `json:"message"`
	Queued  *chat.QueuedMessage `json:"queued"`
}

var (
	toRunning        = store.Transition{From: chat.Pending, To: chat.Running}
	runningToWaiting = store.Transition{From: chat.Running, To: chat.Waiting}
	toRequiresAction = store.Transition{From: chat.Running, To: chat.RequiresAction}
	toError          = store.Transition{From: chat.Running, To: chat.Error, LastError: &chat.ChatError{Kind: "provider", Message: "boom"}}
)

// askTool is an assistant message that calls the dynamic tool twice.
func askTool() chat.Message {
	return chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{
		{Type: chat.PartToolCall, ToolCallID: "call_1", ToolName: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)},
		{Type: chat.PartToolCall, ToolCallID: "call_2", ToolName: "get_weather", Args: json.RawMessage(`{"city":"Rome"}`)},
	}}
}

// inStatus creates a chat of tok's owner and brings it to status.
func (s *server) inStatus(tok string, status chat.Status) chat.Chat {
	s.t.Helper()
	c := s.createChat(tok, map[string]any{"message": "first", "dynamic_tools": []map[string]any{
		{"name": "get_weather", "input_schema": map[string]any{"type": "object"}}}})
	switch status {
	case chat.Waiting:
		s.force(c.ID, nil, toRunning, runningToWaiting)
	case chat.Running:
		s.force(c.ID, nil, toRunning)
	case chat.RequiresAction:
		s.force(c.ID, []chat.Message{askTool()}, toRunning, toRequiresAction)
	case chat.Error:
		s.force(c.ID, nil, toRunning, toError)
	}
	return s.get(tok, c.ID)
}

// get reads a chat through the API.
func (s *server) get(tok, id string) chat.Chat {
	s.t.Helper()
	var c chat.Chat
	s.do("GET", "/api/v1/chats/"+id, tok, nil).expect(s.t, http.StatusOK, &c)
	return c
}

// stored reads a chat from the store, with the fields the API hides.
func (s *server) stored(id string) chat.Chat {
	s.t.Helper()
	c, err := s.st.GetChat(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// queued reads a chat's queue from the store.
func (s *server) queued(id string) []chat.QueuedMessage {
	s.t.Helper()
	q, err := s.st.ListQueued(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return q
}

func TestPostMessage(t *testing.T) {
	type outcome int
	const (
		appended outcome = iota // 202 {"message"}
		queued                  // 202 {"queued"}
		busy                    // 409 chat_busy
	)
	cases := []struct {
		from      chat.Status
		busy      string
		want      outcome
		after     chat.Status
		interrupt bool // the interrupt flag is set
	}{
		{chat.Waiting, "", appended, chat.Pending, false},
		{chat.Waiting, "reject", appended, chat.Pending, false},
		{chat.Error, "queue", appended, chat.Pending, false},
		{chat.Pending, "", queued, chat.Pending, false},
		{chat.Pending, "queue", queued, chat.Pending, false},
		{chat.Pending, "reject", busy, chat.Pending, false},
		{chat.Pending, "interrupt", appended, chat.Pending, false},
		{chat.Running, "queue", queued, chat.Running, false},
		{chat.Running, "reject", busy, chat.Running, false},
		{chat.Running, "interrupt", queued, chat.Running, true},
		{chat.RequiresAction, "queue", queued, chat.RequiresAction, false},
		{chat.RequiresAction, "reject", busy, chat.RequiresAction, false},
		{chat.RequiresAction, "interrupt", appended, chat.Pending, false},
	}
	for _, tc := range cases {
		t.Run(string(tc.from)+"/"+tc.busy, func(t *testing.T) {
			t.Parallel()
			s := newSQLite(t)
			tok := s.token("alice")
			c := s.inStatus(tok, tc.from)
			before := s.messages(tok, c.ID)
			body := map[string]any{"content": "second"}
			if tc.busy != "" {
				body["busy"] = tc.busy
			}
			r := s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, body)
			var res postResult
			switch tc.want {
			case busy:
				e := r.expectError(t, http.StatusConflict, "chat_busy")
				if e.Error.Details["status"] != string(tc.from) {
					t.Fatalf("details %v, want status %s", e.Error.Details, tc.from)
				}
			case appended:
				r.expect(t, http.StatusAccepted, &res)
				if res.Message == nil || res.Queued != nil || res.Message.Role != chat.RoleUser || res.Message.Parts[0].Text != "second" {
					t.Fatalf("want the message in the history: %s", r.body)
				}
			case queued:
				r.expect(t, http.StatusAccepted, &res)
				if res.Queued == nil || res.Message != nil || res.Queued.Parts[0].Text != "second" || res.Queued.ChatID != c.ID {
					t.Fatalf("want the message queued: %s", r.body)
				}
			}
			after := s.stored(c.ID)
			if after.Status != tc.after || after.InterruptRequested != tc.interrupt {
				t.Fatalf("chat is %s (interrupt %v), want %s (interrupt %v)", after.Status, after.InterruptRequested, tc.after, tc.interrupt)
			}
			if tc.from == chat.Error && after.LastError != nil {
				t.Fatalf("last_error survives a new message: %+v", after.LastError)
			}
			msgs := s.messages(tok, c.ID)
			q := s.queued(c.ID)
			switch tc.want {
			case busy:
				if len(msgs) != len(before) || len(q) != 0 {
					t.Fatalf("a rejected message was stored: %d messages, %d queued", len(msgs), len(q))
				}
			case queued:
				if len(msgs) != len(before) || len(q) != 1 || q[0].ID != res.Queued.ID {
					t.Fatalf("queued: %d messages (was %d), queue %+v", len(msgs), len(before), q)
				}
			case appended:
				last := msgs[len(msgs)-1]
				if last.ID != res.Message.ID || last.Parts[0].Text != "second" {
					t.Fatalf("the message is not last in the history: %+v", msgs)
				}
				if tc.from == chat.RequiresAction {
					checkCancelled(t, msgs[len(msgs)-2], "cancelled: the user sent a new message")
				} else if len(msgs) != len(before)+1 {
					t.Fatalf("%d messages, want %d", len(msgs), len(before)+1)
				}
			}
		})
	}

	s := newSQLite(t)
	tok := s.token("alice")
	c := s.inStatus(tok, chat.Waiting)
	for body, field := range map[string]string{
		`{"content": "x", "busy": "sometimes"}`: "busy",
		`{"content": ""}`:                       "content",
		`{}`:                                    "content",
		`{"content": [{"type": "tool-call"}]}`:  "content[0].type",
	} {
		e := s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, body).expectError(t, http.StatusBadRequest, "invalid_field")
		if e.Error.Details["field"] != field {
			t.Errorf("%s: field %v, want %s", body, e.Error.Details["field"], field)
		}
	}
	if s.stored(c.ID).Status != chat.Waiting {
		t.Fatal("an invalid message changed the chat")
	}
}

// checkCancelled checks that m answers both calls of askTool with a
// synthetic error result carrying reason.
func checkCancelled(t *testing.T, m chat.Message, reason string) {
	t.Helper()
	if m.Role != chat.RoleTool || len(m.Parts) != 2 {
		t.Fatalf("want a tool message with two results, got %+v", m)
	}
	for i, id := range []string{"call_1", "call_2"} {
		p := m.Parts[i]
		var out string
		_ = json.Unmarshal(p.Output, &out)
		if p.Type != chat.PartToolResult || p.ToolCallID != id || p.ToolName != "get_weather" || !p.IsError || out != reason {
			t.Fatalf("result %d: %+v (output %s), want a synthetic error for %s: %q", i, p, p.Output, id, reason)
		}
	}
}

func TestQueuedMessagesKeepTheirOrder(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	c := s.inStatus(tok, chat.Running)
	for _, text := range []string{"q1", "q2", "q3"} {
		s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, map[string]any{"content": text}).expect(t, http.StatusAccepted, nil)
	}
	var listed struct{ Queued []chat.QueuedMessage }
	s.do("GET", "/api/v1/chats/"+c.ID+"/queued", tok, nil).expect(t, http.StatusOK, &listed)
	if len(listed.Queued) != 3 || listed.Queued[0].Parts[0].Text != "q1" || listed.Queued[2].Parts[0].Text != "q3" {
		t.Fatalf("GET /queued: %+v, want q1, q2, q3", listed.Queued)
	}
	s.do("GET", "/api/v1/chats/"+c.ID+"/queued", s.token("bob"), nil).expectError(t, http.StatusNotFound, "not_found")
	q := s.queued(c.ID)
	if len(q) != 3 || q[0].Parts[0].Text != "q1" || q[1].Parts[0].Text != "q2" || q[2].Parts[0].Text != "q3" || !(q[0].ID < q[1].ID && q[1].ID < q[2].ID) {
		t.Fatalf("queue: %+v", q)
	}
	// The run ends without promoting them (as an interrupted run may): the
	// next message of the idle chat goes after them.
	s.force(c.ID, nil, runningToWaiting)
	s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, map[string]any{"content": "new"}).expect(t, http.StatusAccepted, nil)
	var texts []string
	for _, m := range s.messages(tok, c.ID) {
		texts = append(texts, m.Parts[0].Text)
	}
	if want := []string{"first", "q1", "q2", "q3", "new"}; !slices.Equal(texts, want) {
		t.Fatalf("history %v, want %v", texts, want)
	}
	if q := s.queued(c.ID); len(q) != 0 {
		t.Fatalf("promoted messages are still queued: %+v", q)
	}
	listed.Queued = nil
	s.do("GET", "/api/v1/chats/"+c.ID+"/queued", tok, nil).expect(t, http.StatusOK, &listed)
	if listed.Queued == nil || len(listed.Queued) != 0 {
		t.Fatalf("GET /queued after the promotion: %+v, want []", listed.Queued)
	}
}

func TestListMessagesAfterAndLimit(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	c := s.inStatus(tok, chat.Running)
	var extra []chat.Message
	for _, text := range []string{"a", "b", "c", "d"} {
		extra = append(extra, chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart(text)}})
	}
	s.force(c.ID, extra)
	all := s.messages(tok, c.ID)
	if len(all) != 5 {
		t.Fatalf("%d messages, want 5", len(all))
	}
	var page struct{ Messages []chat.Message }
	s.do("GET", "/api/v1/chats/"+c.ID+"/messages?after="+strconv.FormatInt(all[1].ID, 10)+"&limit=2", tok, nil).expect(t, http.StatusOK, &page)
	if len(page.Messages) != 2 || page.Messages[0].ID != all[2].ID || page.Messages[1].ID != all[3].ID {
		t.Fatalf("after=%d&limit=2: %+v", all[1].ID, page.Messages)
	}
	s.do("GET", "/api/v1/chats/"+c.ID+"/messages?after="+strconv.FormatInt(all[4].ID, 10), tok, nil).expect(t, http.StatusOK, &page)
	if page.Messages == nil || len(page.Messages) != 0 {
		t.Fatalf("after the last message: %+v, want []", page.Messages)
	}
	for _, q := range []string{"?after=-1", "?after=x", "?limit=0", "?limit=501"} {
		s.do("GET", "/api/v1/chats/"+c.ID+"/messages"+q, tok, nil).expectError(t, http.StatusBadRequest, "invalid_query")
	}
}

func TestInterruptAndRetry(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	cases := []struct {
		from, to  chat.Status
		interrupt bool
	}{
		{chat.Waiting, chat.Waiting, false},
		{chat.Pending, chat.Waiting, false},
		{chat.Running, chat.Running, true},
		{chat.RequiresAction, chat.Waiting, false},
		{chat.Error, chat.Error, false},
	}
	for _, tc := range cases {
		c := s.inStatus(tok, tc.from)
		n := len(s.messages(tok, c.ID))
		var got chat.Chat
		s.do("POST", "/api/v1/chats/"+c.ID+"/interrupt", tok, nil).expect(t, http.StatusOK, &got)
		if got.Status != tc.to || s.stored(c.ID).Status != tc.to || s.stored(c.ID).InterruptRequested != tc.interrupt {
			t.Errorf("interrupt %s: chat is %s (flag %v), want %s (flag %v)", tc.from, got.Status, s.stored(c.ID).InterruptRequested, tc.to, tc.interrupt)
		}
		msgs := s.messages(tok, c.ID)
		if tc.from == chat.RequiresAction {
			checkCancelled(t, msgs[len(msgs)-1], "cancelled: interrupted")
		} else if len(msgs) != n {
			t.Errorf("interrupt %s wrote messages", tc.from)
		}
	}

	for _, st := range []chat.Status{chat.Waiting, chat.Pending, chat.Running, chat.RequiresAction} {
		c := s.inStatus(tok, st)
		e := s.do("POST", "/api/v1/chats/"+c.ID+"/retry", tok, nil).expectError(t, http.StatusConflict, "status_conflict")
		if e.Error.Details["status"] != string(st) {
			t.Errorf("retry %s: details %v", st, e.Error.Details)
		}
	}
	c := s.inStatus(tok, chat.Error)
	if c.LastError == nil {
		t.Fatal("a failed chat shows its last_error")
	}
	var got chat.Chat
	s.do("POST", "/api/v1/chats/"+c.ID+"/retry", tok, nil).expect(t, http.StatusOK, &got)
	if got.Status != chat.Pending || got.LastError != nil {
		t.Fatalf("retry: %+v", got)
	}
}
