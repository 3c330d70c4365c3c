package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// totalSchema is an object schema with one number, "total".
var totalSchema = map[string]any{"type": "object", "properties": map[string]any{"total": map[string]any{"type": "number"}},
	"required": []string{"total"}, "additionalProperties": false}

func jsonSchema(name string, schema any) map[string]any {
	return map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": name, "schema": schema, "strict": true}}
}

// TestResponseFormatRefused: a malformed response_format on POST /chats
// and POST /messages is a 400 naming the field, and creates or posts
// nothing.
func TestResponseFormatRefused(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	big := map[string]any{"type": "object", "description": strings.Repeat("x", chat.MaxOutputSchemaBytes)}
	cases := []struct {
		name   string
		format any
		field  string
	}{
		{"an unknown type", map[string]any{"type": "yaml"}, "response_format.type"},
		{"no type", map[string]any{"json_schema": map[string]any{"schema": totalSchema}}, "response_format.type"},
		{"a schema of a string", jsonSchema("total", map[string]any{"type": "string"}), "response_format.json_schema.schema"},
		{"no schema", map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x"}}, "response_format.json_schema.schema"},
		{"a bad name", jsonSchema("no spaces please", totalSchema), "response_format.json_schema.name"},
		{"a remote $ref", jsonSchema("x", map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "https://example.com/s.json"}}}),
			"response_format.json_schema.schema"},
		{"a schema over 64 KiB", jsonSchema("x", big), "response_format.json_schema.schema"},
		{"text with a schema", map[string]any{"type": "text", "json_schema": map[string]any{"name": "x", "schema": totalSchema}}, "response_format.json_schema"},
	}
	waiting := s.createChat(tok, map[string]any{"title": "t"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := s.do("POST", "/api/v1/chats", tok, map[string]any{"message": "hi", "response_format": c.format}).expectError(t, http.StatusBadRequest, "invalid_field")
			if e.Error.Details["field"] != c.field {
				t.Fatalf("POST /chats field = %v (%s), want %s", e.Error.Details["field"], e.Error.Message, c.field)
			}
			e = s.do("POST", "/api/v1/chats/"+waiting.ID+"/messages", tok, map[string]any{"message": "hi", "response_format": c.format}).
				expectError(t, http.StatusBadRequest, "invalid_field")
			if e.Error.Details["field"] != c.field {
				t.Fatalf("POST /messages field = %v (%s), want %s", e.Error.Details["field"], e.Error.Message, c.field)
			}
		})
	}
	if l := s.listChats(tok, ""); len(l.Chats) != 1 {
		t.Fatalf("%d chats after refused creations, want 1", len(l.Chats))
	}
	if m := s.messages(tok, waiting.ID); len(m) != 0 {
		t.Fatalf("refused posts wrote %+v", m)
	}
	// {"type": "text"} is no format; a json_schema one is shown as given.
	plain := s.createChat(tok, map[string]any{"title": "t", "response_format": map[string]any{"type": "text"}})
	var raw map[string]any
	s.do("GET", "/api/v1/chats/"+plain.ID, tok, nil).expect(t, http.StatusOK, &raw)
	if _, ok := raw["response_format"]; ok {
		t.Fatalf("a text chat shows response_format %v", raw["response_format"])
	}
	formatted := s.createChat(tok, map[string]any{"title": "t", "response_format": jsonSchema("total", totalSchema)})
	if f := formatted.ResponseFormat; f == nil || f.Type != "json_schema" || f.JSONSchema.Name != "total" || !f.JSONSchema.Strict {
		t.Fatalf("response_format = %+v", f)
	}
}

// TestStructuredOutputOverHTTP: a chat asked for JSON repairs an answer
// that is not, shows the valid one's output on GET /chats/{id}, and its
// messages show the repair request and the output part.
func TestStructuredOutputOverHTTP(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{Text: "It is 3."}, llmtest.Turn{Text: `{"total": 3}`})
	s := newLive(t, fake)
	tok := s.token("alice")
	c := s.createChat(tok, map[string]any{"message": "1+2?", "title": "t", "response_format": jsonSchema("total", totalSchema)})
	got := s.waitFor(tok, c.ID, chat.Waiting)
	if string(got.Output) != `{"total":3}` {
		t.Fatalf("GET chat output = %s", got.Output)
	}
	var page struct {
		Messages []json.RawMessage `json:"messages"`
	}
	s.do("GET", "/api/v1/chats/"+c.ID+"/messages", tok, nil).expect(t, http.StatusOK, &page)
	if len(page.Messages) != 4 {
		t.Fatalf("messages = %s", page.Messages)
	}
	if m := string(page.Messages[2]); !strings.Contains(m, `"role":"user"`) || !strings.Contains(m, `{"type":"output-repair","text":"Your answer does not match`) {
		t.Fatalf("the repair request reads %s", m)
	}
	if m := string(page.Messages[3]); !strings.Contains(m, `{"type":"output","json":{"total":3}}`) || !strings.Contains(m, `{"type":"text","text":"{\"total\": 3}"}`) {
		t.Fatalf("the answer reads %s; want its text and its output part", m)
	}
	// A repair request is not the person's to edit.
	var repair chat.Message
	if err := json.Unmarshal(page.Messages[2], &repair); err != nil {
		t.Fatal(err)
	}
	e := s.do("PATCH", "/api/v1/chats/"+c.ID+"/messages/"+strconv.FormatInt(repair.ID, 10), tok, map[string]any{"content": "x"}).
		expectError(t, http.StatusBadRequest, "not_a_user_message")
	if !strings.Contains(e.Error.Message, "repair request") {
		t.Fatalf("edit of a repair request: %s", e.Error.Message)
	}
	// A message without a format in a chat with one is asked in the
	// chat's; one with {"type": "text"} is not, and shows no output.
	fake.Push(llmtest.Turn{Text: "three"})
	s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, map[string]any{"message": "in words", "response_format": map[string]any{"type": "text"}}).
		expect(t, http.StatusAccepted, nil)
	got = s.waitFor(tok, c.ID, chat.Waiting)
	var raw map[string]any
	s.do("GET", "/api/v1/chats/"+c.ID, tok, nil).expect(t, http.StatusOK, &raw)
	if _, ok := raw["output"]; ok || got.ResponseFormat == nil {
		t.Fatalf("after a text turn: output %v, response_format %+v; want no output and the chat's format kept", raw["output"], got.ResponseFormat)
	}
}
