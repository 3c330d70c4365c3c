package chatcli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley/client"
)

// TestChatShowsRepairs: in a chat asked for JSON, the session says when
// the model is asked to repair an answer, and /edit edits the person's
// message, not a repair request (the echo model answers the JSON).
func TestChatShowsRepairs(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil, nil)
	c := client.New(s.url, s.token)
	format := client.JSONSchema("total", json.RawMessage(`{"type":"object","properties":{"total":{"type":"number"}},"required":["total"]}`), false)
	ch, err := c.CreateChat(context.Background(), client.CreateChatRequest{Title: "t", ResponseFormat: format})
	if err != nil {
		t.Fatal(err)
	}
	p := startChat(t, Options{URL: s.url, Token: s.token, ChatID: ch.ID})
	p.waitFor(p.stderr, "> ")
	p.send("what is 1+2?")
	p.waitCount(p.stderr, "the model is asked to repair it", 2)
	p.waitFor(p.stderr, "structured_output_invalid")
	p.send(`/edit {"total": 3}`)
	p.waitFor(p.stdout, `{"total": 3}`)
	p.send("/exit")
	if err := p.wait(); err != nil {
		t.Fatalf("session: %v\nstderr:\n%s", err, p.stderr)
	}
	got, err := c.GetChat(context.Background(), ch.ID)
	if err != nil || string(got.Output) != `{"total":3}` || !strings.HasSuffix(p.stdout.String(), "{\"total\": 3}\n") {
		t.Fatalf("chat output %s, %v; stdout:\n%s", got.Output, err, p.stdout)
	}
}
