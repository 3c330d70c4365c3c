package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// waitingForTools makes a chat that waits in requires_action for two dynamic
// calls (d1, d2); the server-side call s1 of the same step has its result.
func waitingForTools(s *server, tok string) chat.Chat {
	s.t.Helper()
	c := s.createChat(tok, map[string]any{"message": "weather?", "dynamic_tools": []map[string]any{
		{"name": "get_weather", "description": "w", "input_schema": map[string]any{"type": "object"}},
		{"name": "get_time", "description": "t", "input_schema": map[string]any{"type": "object"}},
	}})
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
	const n = 50
	codes := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest("POST", s.url+"/api/v1/chats/"+c.ID+"/tool-results", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			codes[i] = res.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	ok, conflict := 0, 0
	for _, code := range codes {
		switch code {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
			conflict++
		}
	}
	if ok != 1 || conflict != n-1 {
		t.Fatalf("%d successes and %d conflicts of %d, codes %v", ok, conflict, n, codes)
	}
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
