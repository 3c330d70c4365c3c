package api_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestToolResultsFirstPostWinsAcrossReplicas runs two replicas, each an API
// with an engine, on one PostgreSQL database, and brings a chat to
// requires_action for one dynamic tool call the real way (the model calls
// it). Then 50 clients, released together, post the right results, every
// other one through each replica. The submission is one transaction that
// locks the chat, so whichever replica serves it exactly one wins: one 200
// and 49 answers 409 status_conflict whose body names the status the chat
// had moved on to. The results are stored once, the model's next request
// carries that one result, and the chat ends waiting. The strict history
// check runs when the test ends (pgtest.Store registers it).
func TestToolResultsFirstPostWinsAcrossReplicas(t *testing.T) {
	dsn := pgtest.Migrated(t)
	channel := "parley_test_" + strings.ToLower(rand.Text()[:10])
	fake := llmtest.NewOpenAIChat(t)
	const answer = "it is sunny, says the client"
	fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Paris"}`}}},
		llmtest.Turn{Text: answer},
	)
	a := newLivePostgres(t, dsn, channel, fake)
	runEngine(t, a)
	b := newLivePostgres(t, dsn, channel, fake)
	runEngine(t, b)
	tok := a.token("alice")

	c := a.createChat(tok, map[string]any{"title": "first wins", "dynamic_tools": []map[string]any{
		{"name": "get_weather", "description": "the weather of a city", "input_schema": map[string]any{"type": "object"}},
	}})
	st := b.watchChat(tok, c.ID, streamOpts{})
	a.postText(tok, c.ID, "weather in Paris?")
	st.untilStatus(chat.RequiresAction)
	var waiting chat.Chat
	a.do("GET", "/api/v1/chats/"+c.ID, tok, nil).expect(t, http.StatusOK, &waiting)
	if ra := waiting.RequiredAction; waiting.Status != chat.RequiresAction || ra == nil || len(ra.ToolCalls) != 1 || ra.ToolCalls[0].ToolCallID != "call_w" {
		t.Fatalf("chat before the submissions: %s %+v", waiting.Status, waiting.RequiredAction)
	}

	body, _ := json.Marshal(map[string]any{"results": []map[string]any{
		{"tool_call_id": "call_w", "output": map[string]any{"sky": "sunny"}},
	}})
	const n = 50
	answers := postAtOnce(t, []*server{a, b}, "/api/v1/chats/"+c.ID+"/tool-results", tok, body, n)

	won := 0
	refused := map[string]int{} // the statuses the 409s named
	for i, ans := range answers {
		switch ans.status {
		case http.StatusOK:
			won++
			var after chat.Chat
			if err := json.Unmarshal(ans.body, &after); err != nil || after.ID != c.ID || after.Status != chat.Pending || after.RequiredAction != nil {
				t.Errorf("the winning submission (%d, replica %s) answered %s", i, "AB"[i%2:i%2+1], ans.body)
			}
		case http.StatusConflict:
			var e apiErr
			if err := json.Unmarshal(ans.body, &e); err != nil || e.Error.Code != "status_conflict" {
				t.Errorf("submission %d: 409 with body %s", i, ans.body)
				continue
			}
			status, _ := e.Error.Details["status"].(string)
			refused[status]++
			switch chat.Status(status) {
			case chat.Pending, chat.Running, chat.Waiting:
			default:
				t.Errorf("submission %d: 409 names status %q, want the one the winner moved the chat to or a later one: %s", i, status, ans.body)
			}
			if !strings.Contains(e.Error.Message, "the chat is "+status) {
				t.Errorf("submission %d: the message does not name status %q: %s", i, status, ans.body)
			}
		default:
			t.Errorf("submission %d (replica %s): %d %s", i, "AB"[i%2:i%2+1], ans.status, ans.body)
		}
	}
	if won != 1 {
		t.Fatalf("%d submissions of %d won, want exactly 1", won, n)
	}
	t.Logf("1 submission won; the refusals named the statuses %v", refused)

	// The winner's results go to the model, and the chat finishes.
	st.untilStatus(chat.Waiting)
	msgs := a.messages(tok, c.ID)
	var toolMsgs []chat.Message
	results := 0
	for _, m := range msgs {
		if m.Role == chat.RoleTool {
			toolMsgs = append(toolMsgs, m)
		}
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult && p.ToolCallID == "call_w" {
				results++
			}
		}
	}
	if len(msgs) != 4 || msgs[0].Role != chat.RoleUser || msgs[1].Role != chat.RoleAssistant || msgs[3].Role != chat.RoleAssistant || textOf(msgs[3]) != answer {
		t.Errorf("history, want question, call, result, answer: %+v", msgs)
	}
	if results != 1 || len(toolMsgs) != 1 || len(toolMsgs[0].Parts) != 1 ||
		toolMsgs[0].Parts[0].ToolName != "get_weather" || toolMsgs[0].Parts[0].IsError || !sameJSON(toolMsgs[0].Parts[0].Output, `{"sky":"sunny"}`) {
		t.Errorf("want one tool message with the one result of call_w; got %d results in %+v", results, toolMsgs)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	if got := toolResultsSent(t, reqs[1].Body); len(got) != 1 || got[0] != "call_w" {
		t.Errorf("the model's second request answers calls %v, want [call_w] once", got)
	}
}

// sameJSON reports whether raw and want are the same JSON value.
func sameJSON(raw json.RawMessage, want string) bool {
	var x, y any
	if json.Unmarshal(raw, &x) != nil || json.Unmarshal([]byte(want), &y) != nil {
		return false
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

// toolResultsSent lists the tool_call_id of every tool message of a Chat
// Completions request body, in order.
func toolResultsSent(t *testing.T, body json.RawMessage) []string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("model request %s: %v", body, err)
	}
	var ids []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			ids = append(ids, m.ToolCallID)
		}
	}
	return ids
}
