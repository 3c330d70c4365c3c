package client_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley/client"
)

// TestStructuredOutput: a chat created with a response format shows it and
// the last turn's output (the echo model answers the JSON asked for); a
// message's TextFormat turns it off for its turn; the messages hold the
// output part.
func TestStructuredOutput(t *testing.T) {
	s := newServer(t)
	c := s.client()
	ctx := context.Background()
	format := client.JSONSchema("total", json.RawMessage(`{"type":"object","properties":{"total":{"type":"number"}},"required":["total"]}`), false)
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Title: "t", Message: `{"total": 3}`, ResponseFormat: format})
	if err != nil {
		t.Fatal(err)
	}
	if ch.ResponseFormat == nil || ch.ResponseFormat.JSONSchema == nil || ch.ResponseFormat.JSONSchema.Name != "total" {
		t.Fatalf("response_format = %+v", ch.ResponseFormat)
	}
	got := waitStatus(t, c, ch.ID, "waiting")
	if string(got.Output) != `{"total":3}` {
		t.Fatalf("output = %s, want {\"total\":3}", got.Output)
	}
	msgs, err := c.AllMessages(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := msgs[len(msgs)-1].Parts
	if p := last[len(last)-1]; p.Type != client.PartOutput || string(p.JSON) != `{"total":3}` {
		t.Fatalf("the answer's last part = %+v, want its output", p)
	}
	if _, err := c.PostMessage(ctx, ch.ID, client.PostMessageRequest{Content: "in words", ResponseFormat: client.TextFormat}); err != nil {
		t.Fatal(err)
	}
	if got := waitStatus(t, c, ch.ID, "waiting"); got.Output != nil {
		t.Fatalf("a text turn shows output %s", got.Output)
	}
}
