package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/echo"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/invariant"
	"github.com/parleyhq/parley/internal/webhook"
)

// hook is one verified webhook request.
type hook struct {
	id   string
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
	chat struct {
		Status         chat.Status          `json:"status"`
		RequiredAction *chat.RequiredAction `json:"required_action"`
	}
}

// webhookReceiver is an endpoint of alice's (created in the store, with
// a deliverer allowed to reach 127.0.0.1) whose requests must verify with
// its secret.
func webhookReceiver(t *testing.T, s *server) <-chan hook {
	t.Helper()
	got := make(chan hook, 100)
	ep := store.WebhookEndpoint{ID: webhook.NewEndpointID(), Owner: "alice", Events: []string{"*"}, Secret: webhook.NewSecret()}
	wh, err := standardwebhooks.NewWebhook(ep.Secret)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("webhook does not verify: %v", err)
		}
		var h hook
		if err := json.Unmarshal(body, &h); err != nil {
			t.Errorf("webhook body %s: %v", body, err)
		}
		if err := json.Unmarshal(h.Data, &h.chat); err != nil {
			t.Errorf("webhook data %s: %v", h.Data, err)
		}
		h.id = r.Header.Get("webhook-id")
		got <- h
	}))
	t.Cleanup(srv.Close)
	ep.URL = srv.URL + "/hook"
	if err := s.st.CreateWebhook(context.Background(), &ep, 0); err != nil {
		t.Fatal(err)
	}
	d, err := webhook.New(webhook.Config{Store: s.st, PubSub: s.ps, Policy: webhook.Policy{AllowPrivate: true},
		PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return got
}

// nextHook waits for the next webhook.
func nextHook(t *testing.T, hooks <-chan hook) hook {
	t.Helper()
	select {
	case h := <-hooks:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook after 10s")
		return hook{}
	}
}

// TestWebhooksOfAChatRun: a chat answered by the echo model sends
// chat.created (pending, with its first message), chat.status_changed
// (running, then waiting) and chat.completed, in order.
func TestWebhooksOfAChatRun(t *testing.T) {
	st := openSQLite(t, t.TempDir())
	s := startReplica(t, replica{st: st, ps: memory.New(),
		models: models{"echo": {Name: "echo", Provider: echo.New(), ModelID: "echo"}}})
	hooks := webhookReceiver(t, s)
	var c chat.Chat
	if code := s.call("POST", "/api/v1/chats", map[string]any{"message": "hello", "title": "t"}, &c); code != 201 {
		t.Fatalf("create: %d", code)
	}
	s.waitStatus(c.ID, chat.Waiting)
	var got []string
	ids := map[string]bool{}
	for len(got) < 4 {
		h := nextHook(t, hooks)
		got = append(got, h.Type+":"+string(h.chat.Status))
		ids[h.id] = true
	}
	want := []string{"chat.created:pending", "chat.status_changed:running", "chat.status_changed:waiting", "chat.completed:waiting"}
	if !slices.Equal(got, want) || len(ids) != 4 {
		t.Fatalf("webhooks %v (%d ids), want %v", got, len(ids), want)
	}
	s.stop()
	invariant.Check(t, st.(invariant.Store))
}

// TestWebhookActionRequired: a chat that calls a dynamic tool sends
// chat.action_required whose required_action is the chat's, as GET
// /api/v1/chats/{id} shows it.
func TestWebhookActionRequired(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "d1", Name: "ask_user", Args: `{"q":"which city?"}`}}},
		llmtest.Turn{Text: "thanks"})
	st := openSQLite(t, t.TempDir())
	s := start(t, st, fake, nil)
	hooks := webhookReceiver(t, s)
	c := createWithDynamic(s, "weather?")
	c = s.waitStatus(c.ID, chat.RequiresAction)
	var action hook
	for action.Type != "chat.action_required" {
		action = nextHook(t, hooks)
	}
	ra := action.chat.RequiredAction
	if ra == nil || len(ra.ToolCalls) != 1 {
		t.Fatalf("required_action %s", action.Data)
	}
	want, _ := json.Marshal(c.RequiredAction)
	gotJSON, _ := json.Marshal(ra)
	if string(gotJSON) != string(want) {
		t.Fatalf("webhook required_action %s, GET chat %s", gotJSON, want)
	}
	if tc := ra.ToolCalls[0]; tc.ToolCallID != "d1" || tc.ToolName != "ask_user" || tc.Kind != chat.ActionClient ||
		string(tc.Args) != `{"q":"which city?"}` {
		t.Fatalf("tool call %+v", tc)
	}
	code := s.call("POST", "/api/v1/chats/"+c.ID+"/tool-results", map[string]any{"results": []map[string]any{
		{"tool_call_id": "d1", "output": "Paris"}}}, nil)
	if code != 200 {
		t.Fatalf("tool-results: %d", code)
	}
	s.waitStatus(c.ID, chat.Waiting)
	for action.Type != "chat.completed" {
		action = nextHook(t, hooks)
	}
	if action.chat.RequiredAction != nil {
		t.Fatalf("completed with required_action %s", action.Data)
	}
	s.stop()
	invariant.Check(t, st.(invariant.Store))
}
