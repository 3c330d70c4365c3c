package e2e

import (
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/echo"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/testutil/invariant"
)

// TestWebhookCompletedCarriesOutput: chat.completed carries the output of
// the turn it completes (the echo model answers JSON asked for), and a
// later free-text turn's chat.completed carries none.
func TestWebhookCompletedCarriesOutput(t *testing.T) {
	st := openSQLite(t, t.TempDir())
	s := startReplica(t, replica{st: st, ps: memory.New(),
		models: models{"echo": {Name: "echo", Provider: echo.New(), ModelID: "echo"}}})
	hooks := webhookReceiver(t, s)
	format := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "total",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"total": map[string]any{"type": "number"}}, "required": []string{"total"}}}}
	var c chat.Chat
	if code := s.call("POST", "/api/v1/chats", map[string]any{"message": `{"total": 3}`, "title": "t", "response_format": format}, &c); code != 201 {
		t.Fatalf("create: %d", code)
	}
	s.waitStatus(c.ID, chat.Waiting)
	completed := func() json.RawMessage {
		for {
			h := nextHook(t, hooks)
			if h.Type == "chat.completed" {
				var d struct {
					Output json.RawMessage `json:"output"`
				}
				if err := json.Unmarshal(h.Data, &d); err != nil {
					t.Fatal(err)
				}
				return d.Output
			}
		}
	}
	if out := completed(); string(out) != `{"total":3}` {
		t.Fatalf("chat.completed output = %s, want {\"total\":3}", out)
	}
	if code := s.call("POST", "/api/v1/chats/"+c.ID+"/messages", map[string]any{"message": "in words?",
		"response_format": map[string]any{"type": "text"}}, nil); code != 202 {
		t.Fatalf("post: %d", code)
	}
	s.waitStatus(c.ID, chat.Waiting)
	if out := completed(); out != nil {
		t.Fatalf("a free-text turn's chat.completed carries output %s", out)
	}
	s.stop()
	invariant.Check(t, st.(invariant.Store))
}
