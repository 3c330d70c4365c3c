package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
)

// TestPostMessageField: POST /messages takes the message as "message", the
// name POST /chats uses, and still as "content", its older name; both with
// the same value is that value, both with different values is a 400 naming
// the two fields. Validation errors name the field the request used.
func TestPostMessageField(t *testing.T) {
	t.Parallel()
	s := newSQLite(t)
	tok := s.token("alice")

	for name, body := range map[string]any{
		"message":           map[string]any{"message": "hello"},
		"content":           map[string]any{"content": "hello"},
		"message as parts":  map[string]any{"message": []map[string]any{{"type": "text", "text": "hello"}}},
		"both, same":        map[string]any{"message": "hello", "content": "hello"},
		"both, same parts":  `{"message": [{"type": "text", "text": "hello"}], "content": [{"text": "hello", "type": "text"}]}`,
		"content null":      map[string]any{"message": "hello", "content": nil},
		"message null":      map[string]any{"message": nil, "content": "hello"},
		"message with busy": map[string]any{"message": "hello", "busy": "reject"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := s.inStatus(tok, chat.Waiting)
			var res postResult
			s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, body).expect(t, http.StatusAccepted, &res)
			if res.Message == nil || res.Message.Role != chat.RoleUser || len(res.Message.Parts) != 1 || res.Message.Parts[0].Text != "hello" {
				t.Fatalf("want the message in the history: %+v", res)
			}
			msgs := s.messages(tok, c.ID)
			if last := msgs[len(msgs)-1]; last.ID != res.Message.ID || last.Parts[0].Text != "hello" {
				t.Fatalf("the message is not last in the history: %+v", msgs)
			}
			if got := s.stored(c.ID).Status; got != chat.Pending {
				t.Fatalf("chat is %s, want pending", got)
			}
		})
	}

	c := s.inStatus(tok, chat.Waiting)
	before := len(s.messages(tok, c.ID))
	for _, body := range []string{
		`{"message": "hello", "content": "bye"}`,
		`{"message": "hello", "content": [{"type": "text", "text": "hello"}]}`,
		`{"message": [{"type": "text", "text": "a"}], "content": [{"type": "text", "text": "b"}]}`,
	} {
		e := s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, body).expectError(t, http.StatusBadRequest, "invalid_field")
		fields, _ := e.Error.Details["fields"].([]any)
		if e.Error.Details["field"] != "message" || !slices.Equal(fields, []any{"message", "content"}) {
			t.Errorf("%s: details %v, want field message and fields [message content]", body, e.Error.Details)
		}
	}

	for body, field := range map[string]string{
		`{"message": ""}`:                                     "message",
		`{"message": [{"type": "tool-call"}]}`:                "message[0].type",
		`{"content": ""}`:                                     "content",
		`{"content": [{"type": "tool-call"}]}`:                "content[0].type",
		`{"message": "x", "busy": "sometimes"}`:               "busy",
		`{"message": "x", "contents": "x"}`:                   "contents",
		`{"message": {"type": "text", "text": "not a list"}}`: "message",
	} {
		e := s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, body).expectError(t, http.StatusBadRequest, "invalid_field")
		if e.Error.Details["field"] != field {
			t.Errorf("%s: field %v, want %s (%s)", body, e.Error.Details["field"], field, e.Error.Message)
		}
	}
	if got := len(s.messages(tok, c.ID)); got != before || s.stored(c.ID).Status != chat.Waiting {
		t.Fatalf("a refused message changed the chat: %d messages (was %d), %s", got, before, s.stored(c.ID).Status)
	}
}
