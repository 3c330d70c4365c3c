package api_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestSubmissionsAfterTheDeadline: a chat waits for a client's result (d1)
// and a decision (c1), and its deadline has passed (set in the past through
// the store), but no engine runs yet, so no sweep has answered in their
// place. Tool results and decisions posted now are 409 deadline_passed with
// the deadline; nothing is written, and the chat still waits as the sweep
// finds it. The engine's sweep then answers both calls: add never runs.
func TestSubmissionsAfterTheDeadline(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		fake := llmtest.NewOpenAIChat(t)
		fake.Push(llmtest.Turn{Text: "nobody answered"})
		at := newApprovalTools(t)
		var s *server
		if backend == "postgres" {
			st, ps := pgtest.Replica(t, pgtest.Migrated(t), "parley_test_"+strings.ToLower(rand.Text()[:10]), nil)
			s = start(t, st, ps, setup{cfg: liveConfig(fake.URL), keepAlive: time.Hour, tools: at.reg})
		} else {
			s = newSQLite(t, func(su *setup) { su.cfg, su.tools = liveConfig(fake.URL), at.reg })
		}
		s.live = true
		tok := s.token("alice")
		c := s.createChat(tok, map[string]any{"title": "late", "message": "weather, and add", "approve": []string{"add"},
			"dynamic_tools": []map[string]any{{"name": "get_weather", "description": "w", "input_schema": map[string]any{"type": "object"}}}})
		s.force(c.ID, []chat.Message{{Role: chat.RoleAssistant, Parts: []chat.Part{
			{Type: chat.PartToolCall, ToolCallID: "d1", ToolName: "get_weather", Args: json.RawMessage(`{}`)},
			{Type: chat.PartToolCall, ToolCallID: "c1", ToolName: "add", Args: json.RawMessage(`{"a":1,"b":2}`)},
		}}}, store.Transition{From: chat.Pending, To: chat.Running},
			store.Transition{From: chat.Running, To: chat.RequiresAction, ActionTimeout: -time.Minute})

		before := s.stored(c.ID)
		history := s.messages(tok, c.ID)
		posts := []struct{ path, body string }{
			{"/tool-results", `{"results":[{"tool_call_id":"d1","output":"sunny"}]}`},
			{"/approvals", `{"decisions":[{"tool_call_id":"c1","approve":true}]}`},
			{"/approvals", `{"decisions":[{"tool_call_id":"c1","approve":false,"reason":"no"}]}`},
		}
		for _, p := range posts {
			e := s.do("POST", "/api/v1/chats/"+c.ID+p.path, tok, p.body).expectError(t, http.StatusConflict, "deadline_passed")
			d, err := time.Parse(time.RFC3339Nano, e.Error.Details["deadline"].(string))
			if err != nil || !d.Equal(*before.ActionDeadline) {
				t.Fatalf("POST %s: details %v, want the deadline %v", p.path, e.Error.Details, before.ActionDeadline)
			}
		}
		after := s.stored(c.ID)
		if after.Status != chat.RequiresAction || after.Version != before.Version || !after.ActionDeadline.Equal(*before.ActionDeadline) {
			t.Fatalf("after the refused posts the chat is %s, version %d, deadline %v; want it as it was: %s, %d, %v",
				after.Status, after.Version, after.ActionDeadline, before.Status, before.Version, before.ActionDeadline)
		}
		if got := s.messages(tok, c.ID); !reflect.DeepEqual(got, history) {
			t.Fatalf("the refused posts wrote: %d messages, want %d", len(got), len(history))
		}
		expired, err := s.st.ExpiredActions(context.Background(), 10)
		if err != nil || len(expired) != 1 || expired[0].ChatID != c.ID {
			t.Fatalf("the sweep finds %+v, %v; want the chat", expired, err)
		}

		runEngine(t, s)
		s.waitFor(tok, c.ID, chat.Waiting)
		if at.adds.Load() != 0 {
			t.Fatal("a call decided after the deadline ran")
		}
		reqs := fake.Requests()
		if len(reqs) != 1 {
			t.Fatalf("the model got %d requests, want 1", len(reqs))
		}
		if body := strings.ReplaceAll(string(reqs[0].Body), " ", ""); !strings.Contains(body, "denied:nodecisionbeforedeadline") {
			t.Fatalf("the model was not told of the denial: %s", body)
		}
	})
}
