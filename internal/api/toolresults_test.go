package api_test

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// waitingForTools makes a chat that waits in requires_action for two dynamic
// calls (d1, d2); the server-side call s1 of the same step has its result.
func waitingForTools(s *server, tok string) chat.Chat {
	s.t.Helper()
	return waitingWith(s, tok, []map[string]any{
		{"name": "get_weather", "description": "w", "input_schema": map[string]any{"type": "object"}},
		{"name": "get_time", "description": "t", "input_schema": map[string]any{"type": "object"}},
	})
}

// waitingWith is waitingForTools with the chat's dynamic tools declared as
// given (get_weather and get_time, in that order).
func waitingWith(s *server, tok string, tools []map[string]any) chat.Chat {
	s.t.Helper()
	c := s.createChat(tok, map[string]any{"message": "weather?", "dynamic_tools": tools})
	call := func(id, name string) chat.Part {
		return chat.Part{Type: chat.PartToolCall, ToolCallID: id, ToolName: name, Args: json.RawMessage(`{}`)}
	}
	s.force(c.ID, []chat.Message{
		{Role: chat.RoleAssistant, Parts: []chat.Part{call("d1", "get_weather"), call("s1", "current_time"), call("d2", "get_time")}},
		{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolCallID: "s1", ToolName: "current_time", Output: json.RawMessage(`"noon"`)}}},
	}, store.Transition{From: chat.Pending, To: chat.Running},
		store.Transition{From: chat.Running, To: chat.RequiresAction, ActionTimeout: time.Hour})
	return c
}

func TestToolResultsRequiredActionShown(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	c := waitingForTools(s, tok)
	var got chat.Chat
	s.do("GET", "/api/v1/chats/"+c.ID, tok, nil).expect(t, http.StatusOK, &got)
	ra := got.RequiredAction
	if ra == nil || len(ra.ToolCalls) != 2 || ra.ToolCalls[0].ToolCallID != "d1" || ra.ToolCalls[1].ToolCallID != "d2" || ra.Deadline.IsZero() {
		t.Fatalf("required_action %+v", ra)
	}
	list := s.listChats(tok, "?status=requires_action")
	if len(list.Chats) != 1 || list.Chats[0].RequiredAction == nil {
		t.Fatalf("list: %+v", list.Chats)
	}
}

func TestToolResultsIDsMustMatch(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	c := waitingForTools(s, tok)
	path := "/api/v1/chats/" + c.ID + "/tool-results"
	res := func(ids ...string) map[string]any {
		rs := []map[string]any{}
		for _, id := range ids {
			rs = append(rs, map[string]any{"tool_call_id": id, "output": "x"})
		}
		return map[string]any{"results": rs}
	}
	cases := []struct {
		name   string
		body   map[string]any
		detail string
		ids    []string
	}{
		{"missing", res("d1"), "missing", []string{"d2"}},
		{"unknown", res("d1", "d2", "zz"), "unknown", []string{"zz"}},
		{"server-side call is not pending", res("d1", "d2", "s1"), "unknown", []string{"s1"}},
		{"duplicate", res("d1", "d2", "d1"), "duplicate", []string{"d1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := s.do("POST", path, tok, tc.body).expectError(t, http.StatusBadRequest, "invalid_tool_results")
			got, _ := json.Marshal(e.Error.Details[tc.detail])
			want, _ := json.Marshal(tc.ids)
			if string(got) != string(want) {
				t.Fatalf("details.%s = %s, want %s", tc.detail, got, want)
			}
		})
	}
	// Nothing was written by the refused submissions.
	if n := len(s.messages(tok, c.ID)); n != 3 {
		t.Fatalf("%d messages after refused submissions, want 3", n)
	}
}

func TestToolResultsConflicts(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	idle := s.createChat(tok, map[string]any{})
	e := s.do("POST", "/api/v1/chats/"+idle.ID+"/tool-results", tok, map[string]any{"results": []any{}}).
		expectError(t, http.StatusConflict, "status_conflict")
	if e.Error.Details["status"] != "waiting" {
		t.Fatalf("details %+v", e.Error.Details)
	}
	c := waitingForTools(s, tok)
	body := map[string]any{"results": []map[string]any{
		{"tool_call_id": "d2", "output": map[string]any{"time": "noon"}},
		{"tool_call_id": "d1", "output": "sunny", "is_error": false},
	}}
	var after chat.Chat
	s.do("POST", "/api/v1/chats/"+c.ID+"/tool-results", tok, body).expect(t, http.StatusOK, &after)
	if after.Status != chat.Pending || after.RequiredAction != nil {
		t.Fatalf("after submit: %s %+v", after.Status, after.RequiredAction)
	}
	msgs := s.messages(tok, c.ID)
	last := msgs[len(msgs)-1]
	if last.Role != chat.RoleTool || len(last.Parts) != 2 || last.Parts[0].ToolCallID != "d1" || last.Parts[1].ToolCallID != "d2" ||
		string(last.Parts[0].Output) != `"sunny"` || last.Parts[0].ToolName != "get_weather" {
		t.Fatalf("results not persisted in call order: %+v", last)
	}
	e = s.do("POST", "/api/v1/chats/"+c.ID+"/tool-results", tok, body).expectError(t, http.StatusConflict, "status_conflict")
	if e.Error.Details["status"] != "pending" {
		t.Fatalf("second submit details %+v", e.Error.Details)
	}
	// Another owner's chat answers 404.
	s.do("POST", "/api/v1/chats/"+c.ID+"/tool-results", s.token("bob"), body).expectError(t, http.StatusNotFound, "not_found")
}

func TestToolResultsFirstPostWins(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	c := waitingForTools(s, tok)
	body, _ := json.Marshal(map[string]any{"results": []map[string]any{
		{"tool_call_id": "d1", "output": 1}, {"tool_call_id": "d2", "output": 2},
	}})
	expectOneWinner(t, postAtOnce(t, []*server{s}, "/api/v1/chats/"+c.ID+"/tool-results", tok, body, 50))
	results := 0
	for _, m := range s.messages(tok, c.ID) {
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult && (p.ToolCallID == "d1" || p.ToolCallID == "d2") {
				results++
			}
		}
	}
	if results != 2 {
		t.Fatalf("%d results for d1/d2 in the history, want 2", results)
	}
}

// TestToolResultsOutputSchemaAtCreation checks that a dynamic tool's
// output_schema is validated at creation like its input_schema, except that
// it may describe any value, and that it is kept as declared.
func TestToolResultsOutputSchemaAtCreation(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	body := func(output string) string {
		return `{"dynamic_tools":[{"name":"ok","input_schema":{"type":"object"}},` +
			`{"name":"t","description":"d","input_schema":{"type":"object"},"output_schema":` + output + `}]}`
	}
	big := `{"type":"string","description":"` + strings.Repeat("x", s.cfg.Limits.MaxToolSchemaBytes) + `"}`
	refused := []struct{ name, schema, want string }{
		{"invalid schema", `{"type":12}`, "is not a valid JSON Schema"},
		{"an array", `[{"type":"string"}]`, "must be a JSON object (or true or false)"},
		{"remote ref", `{"$ref":"http://example.com/s.json"}`, `external $ref "http://example.com/s.json" is not allowed`},
		{"too big", big, "bytes, at most"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			e := s.do("POST", "/api/v1/chats", tok, body(tc.schema)).expectError(t, http.StatusBadRequest, "invalid_field")
			if e.Error.Details["field"] != "dynamic_tools[1].output_schema" || !strings.Contains(e.Error.Message, tc.want) {
				t.Fatalf("details %v, message %q; want field dynamic_tools[1].output_schema and %q", e.Error.Details, e.Error.Message, tc.want)
			}
		})
	}
	if l := s.listChats(tok, "?archived=any"); len(l.Chats) != 0 {
		t.Fatalf("refused creates wrote %d chats", len(l.Chats))
	}

	// A schema of a string is fine, kept as declared; null is none.
	var c chat.Chat
	s.do("POST", "/api/v1/chats", tok, `{"dynamic_tools":[{"name":"a","input_schema":{"type":"object"},"output_schema":{"type":"string","maxLength":5}},`+
		`{"name":"b","input_schema":{"type":"object"},"output_schema":null},{"name":"c","input_schema":{"type":"object"}}]}`).
		expect(t, http.StatusCreated, &c)
	var got struct {
		DynamicTools []map[string]any `json:"dynamic_tools"`
	}
	s.do("GET", "/api/v1/chats/"+c.ID, tok, nil).expect(t, http.StatusOK, &got)
	if len(got.DynamicTools) != 3 {
		t.Fatalf("dynamic_tools %v", got.DynamicTools)
	}
	if want := map[string]any{"type": "string", "maxLength": 5.0}; !reflect.DeepEqual(got.DynamicTools[0]["output_schema"], want) {
		t.Errorf("output_schema %v, want %v", got.DynamicTools[0]["output_schema"], want)
	}
	for _, tl := range got.DynamicTools[1:] {
		if _, ok := tl["output_schema"]; ok {
			t.Errorf("tool %v: want no output_schema field", tl)
		}
	}
	// The limit is per schema: both of one tool may come close to it.
	near := func(typ string) string {
		prefix := `{"type":"` + typ + `","description":"`
		return prefix + strings.Repeat("x", s.cfg.Limits.MaxToolSchemaBytes-len(prefix)-2) + `"}`
	}
	s.do("POST", "/api/v1/chats", tok, `{"dynamic_tools":[{"name":"a","input_schema":`+near("object")+`,"output_schema":`+near("string")+`}]}`).
		expect(t, http.StatusCreated, nil)
}

// TestToolResultsOutputSchema checks results against their tools'
// output_schema: a failing output is 400 invalid_output and stores nothing,
// error results are not checked, and the status and id checks come first.
func TestToolResultsOutputSchema(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		var s *server
		if backend == "postgres" {
			s = newPostgres(t, pgtest.Migrated(t), "parley_test_"+strings.ToLower(rand.Text()[:10]))
		} else {
			s = newSQLite(t)
		}
		tok := s.token("alice")
		tools := []map[string]any{
			{"name": "get_weather", "description": "w", "input_schema": map[string]any{"type": "object"},
				"output_schema": map[string]any{"type": "object", "properties": map[string]any{"temp_c": map[string]any{"type": "number"}}, "required": []string{"temp_c"}}},
			{"name": "get_time", "description": "t", "input_schema": map[string]any{"type": "object"},
				"output_schema": map[string]any{"type": "string"}},
		}
		results := func(d1, d2 any, d1Error bool) map[string]any {
			return map[string]any{"results": []map[string]any{
				{"tool_call_id": "d1", "output": d1, "is_error": d1Error}, {"tool_call_id": "d2", "output": d2},
			}}
		}
		c := waitingWith(s, tok, tools)
		path := "/api/v1/chats/" + c.ID + "/tool-results"
		refused := []struct {
			name   string
			body   map[string]any
			id     string
			detail string
		}{
			{"wrong type", results(map[string]any{"temp_c": "warm"}, "noon", false), "d1", "at '/temp_c': got string, want number"},
			{"missing property", results(map[string]any{"sky": "clear"}, "noon", false), "d1", "missing property 'temp_c'"},
			{"second result", results(map[string]any{"temp_c": 21}, 12, false), "d2", "got number, want string"},
			{"absent output", map[string]any{"results": []map[string]any{{"tool_call_id": "d1", "output": map[string]any{"temp_c": 21}}, {"tool_call_id": "d2"}}}, "d2", "got null, want string"},
		}
		for _, tc := range refused {
			t.Run(tc.name, func(t *testing.T) {
				e := s.do("POST", path, tok, tc.body).expectError(t, http.StatusBadRequest, "invalid_output")
				if e.Error.Details["tool_call_id"] != tc.id || !strings.Contains(e.Error.Details["error"].(string), tc.detail) ||
					!strings.Contains(e.Error.Message, tc.id) || !strings.Contains(e.Error.Message, tc.detail) {
					t.Fatalf("message %q, details %v; want them to name %s and %q", e.Error.Message, e.Error.Details, tc.id, tc.detail)
				}
			})
		}
		// The ids are checked before the outputs.
		bad := results("sunny", 12, false)
		bad["results"] = append(bad["results"].([]map[string]any), map[string]any{"tool_call_id": "zz", "output": 1})
		s.do("POST", path, tok, bad).expectError(t, http.StatusBadRequest, "invalid_tool_results")
		// Nothing was stored: the chat still waits for both calls.
		var still chat.Chat
		s.do("GET", "/api/v1/chats/"+c.ID, tok, nil).expect(t, http.StatusOK, &still)
		if still.Status != chat.RequiresAction || still.RequiredAction == nil || len(still.RequiredAction.ToolCalls) != 2 {
			t.Fatalf("after refused outputs: %s %+v", still.Status, still.RequiredAction)
		}
		if n := len(s.messages(tok, c.ID)); n != 3 {
			t.Fatalf("%d messages after refused outputs, want 3", n)
		}

		// Outputs that satisfy the schemas are stored.
		var after chat.Chat
		s.do("POST", path, tok, results(map[string]any{"temp_c": 21, "sky": "clear"}, "noon", false)).expect(t, http.StatusOK, &after)
		if after.Status != chat.Pending {
			t.Fatalf("after valid outputs: %s", after.Status)
		}
		msgs := s.messages(tok, c.ID)
		if last := msgs[len(msgs)-1]; last.Role != chat.RoleTool || len(last.Parts) != 2 || string(last.Parts[1].Output) != `"noon"` {
			t.Fatalf("stored results %+v", last)
		}
		// Once answered, a later submission is a 409 whatever its outputs.
		s.do("POST", path, tok, results("sunny", 12, false)).expectError(t, http.StatusConflict, "status_conflict")

		// An error result's output is not checked; the others still are.
		c2 := waitingWith(s, tok, tools)
		path = "/api/v1/chats/" + c2.ID + "/tool-results"
		e := s.do("POST", path, tok, results("the weather service is down", 12, true)).expectError(t, http.StatusBadRequest, "invalid_output")
		if e.Error.Details["tool_call_id"] != "d2" {
			t.Fatalf("details %v, want d2 refused and d1 (an error result) not checked", e.Error.Details)
		}
		s.do("POST", path, tok, results("the weather service is down", "noon", true)).expect(t, http.StatusOK, &after)
		msgs = s.messages(tok, c2.ID)
		if last := msgs[len(msgs)-1]; !last.Parts[0].IsError || string(last.Parts[0].Output) != `"the weather service is down"` {
			t.Fatalf("stored error result %+v", last.Parts[0])
		}
	})
}
