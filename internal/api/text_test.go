package api_test

import (
	"crypto/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// newPostgresOne starts one API instance on a fresh PostgreSQL schema.
func newPostgresOne(t *testing.T, opts ...func(*setup)) *server {
	t.Helper()
	return newPostgres(t, pgtest.Migrated(t), "parley_test_"+strings.ToLower(rand.Text()[:10]), opts...)
}

// bothStores runs test on SQLite and on PostgreSQL (when PARLEY_TEST_POSTGRES
// is set): the API must answer the same on both.
func bothStores(t *testing.T, test func(t *testing.T, s *server), opts ...func(*setup)) {
	t.Run("SQLite", func(t *testing.T) { test(t, newSQLite(t, opts...)) })
	t.Run("PostgreSQL", func(t *testing.T) { test(t, newPostgresOne(t, opts...)) })
}

// TestNULRefused checks that a string holding U+0000, in any field a client
// sends, is a 400 naming the field on both stores (PostgreSQL cannot store it
// in text or jsonb), and that nothing is written.
func TestNULRefused(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		tok := s.token("alice")
		tool := func(schema string) string {
			return `{"dynamic_tools":[{"name":"t","description":"d","input_schema":` + schema + `}]}`
		}
		creates := []struct{ name, body, field string }{
			{"title", `{"title":"a\u0000b"}`, "title"},
			{"message", `{"message":"a\u0000b"}`, "message"},
			{"message part", `{"message":[{"type":"text","text":"ok"},{"type":"text","text":"\u0000"}]}`, "message[1].text"},
			{"system prompt", `{"system_prompt":"be \u0000 brief"}`, "system_prompt"},
			{"label value", `{"labels":{"env":"a\u0000"}}`, "labels.env"},
			{"label key", `{"labels":{"e\u0000v":"x"}}`, "labels"},
			{"tool description", `{"dynamic_tools":[{"name":"t","description":"\u0000","input_schema":{"type":"object"}}]}`, "dynamic_tools[0].description"},
			{"schema string", tool(`{"type":"object","description":"x\u0000"}`), "dynamic_tools[0].input_schema.description"},
			{"schema default", tool(`{"type":"object","properties":{"city":{"type":"string","default":["ok","\u0000"]}}}`), "dynamic_tools[0].input_schema.properties.city.default[1]"},
			{"schema key", tool(`{"type":"object","properties":{"c\u0000":{}}}`), "dynamic_tools[0].input_schema.properties"},
			{"escaped backslash then NUL", `{"title":"\\\u0000"}`, "title"},
		}
		for _, tc := range creates {
			t.Run("create "+tc.name, func(t *testing.T) {
				e := s.do("POST", "/api/v1/chats", tok, tc.body).expectError(t, http.StatusBadRequest, "invalid_field")
				if got, _ := e.Error.Details["field"].(string); got != tc.field || !strings.Contains(e.Error.Message, `\u0000`) {
					t.Fatalf("details.field %q, want %q; message %q", got, tc.field, e.Error.Message)
				}
			})
		}
		if l := s.listChats(tok, "?archived=any"); len(l.Chats) != 0 {
			t.Fatalf("refused creates wrote %d chats", len(l.Chats))
		}

		c := s.createChat(tok, map[string]any{"title": "kept", "labels": map[string]string{"k": "v"}})
		later := []struct{ name, method, path, body, field string }{
			{"patch title", "PATCH", "", `{"title":"x\u0000"}`, "title"},
			{"patch label", "PATCH", "", `{"labels":{"k":"\u0000"}}`, "labels.k"},
			{"message", "POST", "/messages", `{"content":"hi\u0000"}`, "content"},
			{"message part", "POST", "/messages", `{"content":[{"type":"text","text":"\u0000"}]}`, "content[0].text"},
		}
		for _, tc := range later {
			t.Run(tc.name, func(t *testing.T) {
				e := s.do(tc.method, "/api/v1/chats/"+c.ID+tc.path, tok, tc.body).expectError(t, http.StatusBadRequest, "invalid_field")
				if got, _ := e.Error.Details["field"].(string); got != tc.field {
					t.Fatalf("details.field %q, want %q (%s)", got, tc.field, e.Error.Message)
				}
			})
		}
		if got := s.get(tok, c.ID); got.Title != "kept" || got.Labels["k"] != "v" || got.Status != "waiting" {
			t.Fatalf("a refused request changed the chat: %+v", got)
		}
		if msgs := s.messages(tok, c.ID); len(msgs) != 0 {
			t.Fatalf("a refused message was stored: %+v", msgs)
		}

		w := waitingForTools(s, tok)
		results := []struct{ name, output, field string }{
			{"string", `"a\u0000"`, "results[0].output"},
			{"nested", `{"rows":[{"v":"ok"},{"v":"\u0000"}]}`, "results[0].output.rows[1].v"},
			{"key", `{"\u0000":1}`, "results[0].output"},
		}
		for _, tc := range results {
			t.Run("tool result "+tc.name, func(t *testing.T) {
				body := `{"results":[{"tool_call_id":"d1","output":` + tc.output + `},{"tool_call_id":"d2","output":1}]}`
				e := s.do("POST", "/api/v1/chats/"+w.ID+"/tool-results", tok, body).expectError(t, http.StatusBadRequest, "invalid_field")
				if got, _ := e.Error.Details["field"].(string); got != tc.field {
					t.Fatalf("details.field %q, want %q (%s)", got, tc.field, e.Error.Message)
				}
			})
		}
		if got := s.get(tok, w.ID); got.Status != "requires_action" {
			t.Fatalf("refused tool results moved the chat to %s", got.Status)
		}

		// Text that merely looks like an escape is text: a backslash, then "u0000".
		ok := s.createChat(tok, map[string]any{"title": `\u0000`, "system_prompt": "日本語 ü 😀"})
		if got := s.get(tok, ok.ID); got.Title != `\u0000` || got.SystemPrompt != "日本語 ü 😀" {
			t.Fatalf("stored %q / %q", got.Title, got.SystemPrompt)
		}
	})
}

// maxDepth is the documented nesting limit of a request body.
const maxDepth = 64

// nest is JSON of n arrays, one inside the other.
func nest(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestJSONDepthLimit checks the one nesting limit of request bodies: up to 64
// levels is stored alike on both stores, deeper is a 400 json_too_deep that
// says where, however deep (SQLite refused stored JSON past 1,000 levels with
// a 500, and the decoder alone took 10,000).
func TestJSONDepthLimit(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		tok := s.token("alice")
		// The schema is at level 4 of the body: {"dynamic_tools":[{"input_schema":{
		withDefault := func(levels int) string {
			return `{"dynamic_tools":[{"name":"t","description":"d","input_schema":{"type":"object","default":` + nest(levels) + `}}]}`
		}
		c := s.createChat(tok, nil)
		w := waitingForTools(s, tok)
		output := func(levels int) string {
			return `{"results":[{"tool_call_id":"d1","output":` + nest(levels) + `},{"tool_call_id":"d2","output":1}]}`
		}
		refused := []struct{ name, method, path, body, field string }{
			{"schema default one too deep", "POST", "/api/v1/chats", withDefault(maxDepth - 3), "dynamic_tools[0].input_schema.default" + strings.Repeat("[0]", maxDepth-4)},
			{"schema default past SQLite's limit", "POST", "/api/v1/chats", withDefault(1100), "dynamic_tools[0].input_schema.default" + strings.Repeat("[0]", maxDepth-4)},
			{"past the decoder's limit", "POST", "/api/v1/chats", nest(20000), strings.Repeat("[0]", maxDepth)},
			{"message", "POST", "/api/v1/chats/" + c.ID + "/messages", `{"content":` + nest(maxDepth) + `}`, "content" + strings.Repeat("[0]", maxDepth-1)},
			{"patch", "PATCH", "/api/v1/chats/" + c.ID, `{"labels":{"k":` + nest(maxDepth) + `}}`, "labels.k" + strings.Repeat("[0]", maxDepth-2)},
			{"tool result", "POST", "/api/v1/chats/" + w.ID + "/tool-results", output(1100), "results[0].output" + strings.Repeat("[0]", maxDepth-3)},
		}
		for _, tc := range refused {
			t.Run(tc.name, func(t *testing.T) {
				e := s.do(tc.method, tc.path, tok, tc.body).expectError(t, http.StatusBadRequest, "json_too_deep")
				d := e.Error.Details
				if d["limit"] != float64(maxDepth) || d["field"] != tc.field || d["line"] != float64(1) || !strings.Contains(e.Error.Message, "deeper than 64 levels") {
					t.Fatalf("details %v, want limit %d and field %q; message %q", d, maxDepth, tc.field, e.Error.Message)
				}
			})
		}
		if l := s.listChats(tok, "?archived=any"); len(l.Chats) != 2 {
			t.Fatalf("refused creates wrote chats: %d chats, want 2", len(l.Chats))
		}
		if got := s.get(tok, w.ID); got.Status != "requires_action" {
			t.Fatalf("refused tool results moved the chat to %s", got.Status)
		}

		// At the limit: accepted and stored.
		at := s.do("POST", "/api/v1/chats", tok, withDefault(maxDepth-4))
		at.expect(t, http.StatusCreated, nil)
		s.do("POST", "/api/v1/chats/"+w.ID+"/tool-results", tok, output(maxDepth-3)).expect(t, http.StatusOK, nil)
		msgs := s.messages(tok, w.ID)
		if last := msgs[len(msgs)-1]; len(last.Parts) != 2 || string(last.Parts[0].Output) != nest(maxDepth-3) {
			t.Fatalf("stored tool result %+v", last.Parts)
		}
	})
}
