package webhook

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// turnReader answers a chat with one dynamic tool and a turn of calls.
type turnReader struct {
	turn []chat.Message
}

func (r turnReader) GetChat(_ context.Context, id string) (chat.Chat, error) {
	return chat.Chat{ID: id, DynamicTools: []chat.DynamicTool{{Name: "ask"}}}, nil
}

func (r turnReader) TurnThrough(context.Context, string, int64) ([]chat.Message, error) {
	return r.turn, nil
}

type describer struct{}

func (describer) Describe(name string) (string, string, bool) { return "lua:x", "does " + name, true }

func actionEvent(args string, errMsg string) store.WebhookEvent {
	deadline := time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC)
	ev := store.WebhookEvent{ID: "msg_1", Owner: "alice", ChatID: "c1", Type: store.EventActionRequired,
		CreatedAt: deadline.Add(-time.Hour), ThroughMessageID: 2}
	ev.Chat = chat.Chat{Title: "t", Status: chat.RequiresAction, Labels: map[string]string{"k": "v"},
		ActionDeadline: &deadline, Usage: chat.Usage{InputTokens: 3}}
	if errMsg != "" {
		ev.Chat.LastError = &chat.ChatError{Kind: "provider", Message: errMsg}
	}
	return ev
}

func turnOf(args string) turnReader {
	return turnReader{turn: []chat.Message{{ID: 2, Role: chat.RoleAssistant, Parts: []chat.Part{
		{Type: chat.PartToolCall, ToolCallID: "c1", ToolName: "ask", Args: json.RawMessage(args)},
		{Type: chat.PartToolCall, ToolCallID: "c2", ToolName: "shell", Args: json.RawMessage(`{"cmd":"ls"}`)},
	}}}}
}

func TestBuildBodyRequiredAction(t *testing.T) {
	b, err := BuildBody(context.Background(), turnOf(`{"q":"why?"}`), describer{}, actionEvent("", ""))
	if err != nil {
		t.Fatal(err)
	}
	var got Body
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	ra := got.Data.RequiredAction
	if got.Type != store.EventActionRequired || ra == nil || len(ra.ToolCalls) != 2 || !ra.Deadline.Equal(*actionEvent("", "").Chat.ActionDeadline) {
		t.Fatalf("body %s", b)
	}
	if c := ra.ToolCalls[0]; c.Kind != chat.ActionClient || string(c.Args) != `{"q":"why?"}` {
		t.Fatalf("client call %+v", c)
	}
	if c := ra.ToolCalls[1]; c.Kind != chat.ActionApproval || c.Source != "lua:x" || c.Description != "does shell" {
		t.Fatalf("approval call %+v", c)
	}
	if got.Data.Labels["k"] != "v" || got.Data.Usage.InputTokens != 3 || len(got.Data.Omitted) != 0 {
		t.Fatalf("body %s", b)
	}
}

// TestBuildBodySheds: a body over 20 KB sheds the calls' arguments, then
// the error message's tail, and says so.
func TestBuildBodySheds(t *testing.T) {
	big := `{"text":"` + strings.Repeat("a", 30000) + `"}`
	b, err := BuildBody(context.Background(), turnOf(big), nil, actionEvent("", strings.Repeat("é", 20000)))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxBodyBytes {
		t.Fatalf("body of %d bytes", len(b))
	}
	var got Body
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Data.Omitted, []string{"required_action.tool_calls.args", "last_error.message"}) {
		t.Fatalf("omitted %v", got.Data.Omitted)
	}
	if c := got.Data.RequiredAction.ToolCalls[0]; c.ToolCallID != "c1" || string(c.Args) != "null" {
		t.Fatalf("shed call %+v", c)
	}
	if m := got.Data.LastError.Message; len(m) > maxErrorMessage || !strings.HasPrefix(m, "é") || strings.ContainsRune(m, '\uFFFD') {
		t.Fatalf("shed message of %d bytes", len(m))
	}
	// Small enough: nothing shed.
	b, err = BuildBody(context.Background(), turnOf(`{}`), nil, actionEvent("", strings.Repeat("x", 5000)))
	if err != nil || strings.Contains(string(b), "omitted") {
		t.Fatalf("body %s, %v", b, err)
	}
}
