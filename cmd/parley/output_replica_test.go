package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestStructuredOutputSurvivesSIGKILL: two replicas on PostgreSQL; the one
// running a chat asked for JSON gets an answer that is not, writes the
// repair request, and is SIGKILLed while the model streams the repaired
// answer. The other replica takes the chat over with the turn's format and
// its count of repairs: it asks the model again in the format, stores the
// valid answer's output, and writes no second repair request.
func TestStructuredOutputSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pgtest.Store(t, dsn) // its cleanup checks every chat's history once the replicas stopped
	fake := llmtest.NewOpenAIChat(t)
	repairing := make(chan struct{})
	fake.Push(
		llmtest.Turn{Text: "It is three."},
		llmtest.Turn{Text: `{"total":`, ChunkSize: 2, HoldAfter: 3, Started: repairing},
		llmtest.Turn{Text: `{"total": 3}`},
	)
	dir := t.TempDir()
	a, b := startReplicas(t, dir, dsn, replicaConfig(t, dir, fake.URL, "30s"))
	body, _ := json.Marshal(map[string]any{"title": "output", "message": "1+2?", "response_format": map[string]any{
		"type": "json_schema", "json_schema": map[string]any{"name": "total", "strict": true, "schema": map[string]any{
			"type": "object", "properties": map[string]any{"total": map[string]any{"type": "number"}},
			"required": []string{"total"}, "additionalProperties": false}}}})
	code, res := do(t, http.MethodPost, a.URL+"/api/v1/chats", a.Token, string(body))
	var c chat.Chat
	if code != http.StatusCreated || json.Unmarshal([]byte(res), &c) != nil {
		t.Fatalf("create chat: %d %s", code, res)
	}
	held, other := holder(t, dsn, c.ID, a, b)
	// The survivor's stream of the chat, open before the kill: it tells
	// when the chat the survivor took over ends its run.
	evs := chatEvents(t, other.URL+"/api/v1/chats/"+c.ID+"/stream", a.Token)
	select {
	case <-repairing:
	case <-time.After(deadline):
		t.Fatal("the model was never asked to repair its answer")
	}
	if err := held.Cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	held.Wait()

	timeout := time.After(recoveryLimit)
	for {
		ev := nextEvent(t, evs, timeout)
		var st struct{ Status chat.Status }
		if ev.Event == "status" && json.Unmarshal([]byte(ev.Data), &st) == nil && (st.Status == chat.Waiting || st.Status == chat.Error) {
			break
		}
	}
	var got chat.Chat
	code, res = get(t, other.URL+"/api/v1/chats/"+c.ID, a.Token)
	if code != http.StatusOK || json.Unmarshal([]byte(res), &got) != nil {
		t.Fatalf("get chat: %d %s", code, res)
	}
	if got.Status != chat.Waiting || string(got.Output) != `{"total":3}` {
		t.Fatalf("chat after the kill: %s, output %s, last_error %+v; want waiting with the output", got.Status, got.Output, got.LastError)
	}
	code, res = get(t, other.URL+"/api/v1/chats/"+c.ID+"/messages", a.Token)
	var page struct{ Messages []chat.Message }
	if code != http.StatusOK || json.Unmarshal([]byte(res), &page) != nil {
		t.Fatalf("messages: %d %s", code, res)
	}
	var repairs int
	for _, m := range page.Messages {
		if chat.IsRepair(m) {
			repairs++
		}
	}
	if len(page.Messages) != 4 || repairs != 1 {
		t.Fatalf("history, want the question, the answer, one repair request and the valid answer:\n%s", res)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 || !strings.Contains(string(reqs[2].Body), `"response_format"`) ||
		!strings.Contains(string(reqs[2].Body), "Answer again with only a JSON value") {
		t.Fatalf("the model got %d requests; the last must carry the format and the repair request", len(reqs))
	}
	if code := other.Stop(); code != 0 {
		t.Errorf("the other replica exited %d\nstderr:\n%s", code, other.Stderr)
	}
}
