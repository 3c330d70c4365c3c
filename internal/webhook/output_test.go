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

// completedEvent is a chat.completed event through message 4.
func completedEvent() store.WebhookEvent {
	return store.WebhookEvent{ID: "msg_2", Owner: "alice", ChatID: "c1", Type: store.EventCompleted, ThroughMessageID: 4,
		CreatedAt: time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC), Chat: chat.Chat{Title: "t", Status: chat.Waiting}}
}

// answered is a turn whose answer has the structured output out.
func answered(out string) turnReader {
	return turnReader{turn: []chat.Message{{ID: 4, Role: chat.RoleAssistant, Parts: []chat.Part{
		chat.TextPart(out), {Type: chat.PartOutput, JSON: json.RawMessage(out)}}}}}
}

// TestBuildBodyOutput: chat.completed carries the output of its turn, no
// other event does, and a body too large sheds the output last.
func TestBuildBodyOutput(t *testing.T) {
	b, err := BuildBody(context.Background(), answered(`{"total":3}`), nil, completedEvent())
	if err != nil || !strings.Contains(string(b), `"output":{"total":3}`) {
		t.Fatalf("chat.completed body %s, %v; want the output", b, err)
	}
	other := completedEvent()
	other.Type = store.EventStatusChanged
	if b, err := BuildBody(context.Background(), answered(`{"total":3}`), nil, other); err != nil || strings.Contains(string(b), `"output"`) {
		t.Fatalf("chat.status_changed body %s, %v; want no output", b, err)
	}
	if b, err := BuildBody(context.Background(), turnReader{turn: []chat.Message{{ID: 4, Role: chat.RoleAssistant,
		Parts: []chat.Part{chat.TextPart("free text")}}}}, nil, completedEvent()); err != nil || strings.Contains(string(b), `"output"`) {
		t.Fatalf("a free-text turn's body %s, %v; want no output", b, err)
	}
	big := `{"text":"` + strings.Repeat("a", 30000) + `"}`
	b, err = BuildBody(context.Background(), answered(big), nil, completedEvent())
	if err != nil || len(b) > MaxBodyBytes {
		t.Fatalf("body of %d bytes, %v", len(b), err)
	}
	var got Body
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Data.Output != nil || !slices.Equal(got.Data.Omitted, []string{"output"}) {
		t.Fatalf("omitted %v, output of %d bytes; want the output shed", got.Data.Omitted, len(got.Data.Output))
	}
}
