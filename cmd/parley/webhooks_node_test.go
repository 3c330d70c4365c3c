package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/nodetest"
	"github.com/parleyhq/parley/internal/testutil/parleybin"
)

// nodeEvent is an event the Node receiver accepted.
type nodeEvent struct {
	WebhookID    string    `json:"webhook_id"`
	Type         string    `json:"type"`
	Data         chatEvent `json:"data"`
	Signatures   int       `json:"signatures"`
	VerifiedWith []string  `json:"verified_with"`
}

// chatEvent is the part of an event's data the test reads.
type chatEvent struct {
	ID             string `json:"id"`
	Owner          string `json:"owner"`
	Title          string `json:"title"`
	Status         string `json:"status"`
	RequiredAction *struct {
		ToolCalls []struct {
			ToolCallID string `json:"tool_call_id"`
			ToolName   string `json:"tool_name"`
		} `json:"tool_calls"`
	} `json:"required_action"`
	Usage struct {
		InputTokens int64 `json:"input_tokens"`
	} `json:"usage"`
}

// TestWebhooksNodeVerifier: a receiver written with the official npm
// standardwebhooks package (testdata/webhook_receiver.cjs) verifies the
// deliveries of a real parley serve: a chat.completed, a
// chat.action_required with the pending call, and, after a secret
// rotation, a chat.completed that both the old and the new secret verify.
// A body changed by one byte verifies with neither.
func TestWebhooksNodeVerifier(t *testing.T) {
	t.Parallel()
	nodetest.Modules(t)
	script, err := filepath.Abs(filepath.Join("testdata", "webhook_receiver.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(
		llmtest.Turn{Text: "Hello from the model.", Usage: llmtest.Usage{InputTokens: 11, OutputTokens: 5}},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_n1", Name: "lookup", Args: `{"q":"x"}`}}},
		llmtest.Turn{Text: "Found it."},
	)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	t.Cleanup(func() { parleybin.CheckHistories(t, filepath.Join(dataDir, "parley.db")) })
	cfg := parleybin.FakeModelConfig(t, dir, fake.URL, webhooksConfig)
	s := startServe(t, dir, []string{parleybin.FakeKeyEnv + "=test-key"}, "--config", cfg, "--data-dir", dataDir)

	out := nodetest.Run(t, script, map[string]string{"PARLEY_URL": s.URL, "PARLEY_TOKEN": s.Token})
	var got struct {
		EndpointID    string      `json:"endpoint_id"`
		CompletedChat string      `json:"completed_chat"`
		ActionChat    string      `json:"action_chat"`
		Events        []nodeEvent `json:"events"`
		Requests      int         `json:"requests"`
		Duplicates    int         `json:"duplicates"`
		Problems      []string    `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("the script's output %q: %v", out, err)
	}
	if len(got.Problems) != 0 {
		t.Fatalf("the Node receiver: %q\nserve stderr:\n%s", got.Problems, s.Stderr)
	}
	if len(got.Events) != 3 {
		t.Fatalf("the Node receiver accepted %d events, want 3: %+v", len(got.Events), got.Events)
	}
	done, action, rotated := got.Events[0], got.Events[1], got.Events[2]
	if done.Type != "chat.completed" || done.Data.ID != got.CompletedChat || done.Data.Status != "waiting" ||
		done.Data.Title != "node completed" || done.Data.Owner != "admin" || done.Data.Usage.InputTokens != 11 {
		t.Errorf("the first event: %+v", done)
	}
	if action.Type != "chat.action_required" || action.Data.ID != got.ActionChat || action.Data.Status != "requires_action" ||
		action.Data.RequiredAction == nil || len(action.Data.RequiredAction.ToolCalls) != 1 ||
		action.Data.RequiredAction.ToolCalls[0].ToolName != "lookup" || action.Data.RequiredAction.ToolCalls[0].ToolCallID != "call_n1" {
		t.Errorf("the second event: %+v", action)
	}
	if rotated.Type != "chat.completed" || rotated.Data.ID != got.ActionChat || rotated.Signatures != 2 || len(rotated.VerifiedWith) != 2 {
		t.Errorf("the event after the rotation: %+v; want two signatures, each secret verifying one", rotated)
	}
	if got.Duplicates != 0 || got.Requests != 3 {
		t.Errorf("%d requests, %d duplicates; want 3 and none (the receiver answered each at once)", got.Requests, got.Duplicates)
	}

	// The API lists the same events, delivered.
	ds := waitDeliveries(t, s.URL, s.Token, got.EndpointID, "3 delivered", allDelivered(3))
	for i, d := range ds { // newest first
		e := got.Events[len(got.Events)-1-i]
		if d.EventID != e.WebhookID || d.EventType != e.Type || d.Status != "delivered" || d.Attempts != 1 {
			t.Errorf("delivery %d: %+v, want %s %s delivered in one attempt", i, d, e.WebhookID, e.Type)
		}
	}
	if code := s.Stop(); code != 0 {
		t.Errorf("serve exited %d\nstderr:\n%s", code, s.Stderr)
	}
}
