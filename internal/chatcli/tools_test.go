package chatcli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/client"
)

// weather is the get_weather dynamic tool of these tests, with desc.
func weather(desc string) client.DynamicTool {
	return client.DynamicTool{Name: "get_weather", Description: desc,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}
}

// TestChatHumanTool: an interactive session with a dynamic tool answered by
// the person at the terminal: the call is shown, the typed result goes to
// the model, and its answer mentions it; an "!error" result and plain text
// too.
func TestChatHumanTool(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil, nil)
	p := startChat(t, Options{URL: s.url, Token: s.token, Tools: []client.DynamicTool{weather("Current weather for a city")}})

	p.send(`/call get_weather {"city": "Paris"}`)
	p.waitFor(p.stderr, `tool call get_weather {"city":"Paris"}`)
	p.send(`{"temp_c": 21, "sky": "clear"}`)
	p.waitFor(p.stdout, `tool get_weather returned {"temp_c":21,"sky":"clear"}`)

	p.send(`/call get_weather {"city": "Oslo"}`)
	p.waitFor(p.stderr, `tool call get_weather {"city":"Oslo"}`)
	p.send(`!error the station is offline`)
	p.waitFor(p.stdout, "tool get_weather failed: the station is offline")

	p.send(`/call get_weather {"city": "Rome"}`)
	p.waitFor(p.stderr, `tool call get_weather {"city":"Rome"}`)
	p.send(`sunny, 30 degrees`)
	p.waitFor(p.stdout, "tool get_weather returned sunny, 30 degrees")

	p.send("thanks")
	p.waitFor(p.stdout, "echo: thanks")
	if err := p.wait(); err != nil {
		t.Fatalf("the session ended with %v at the end of input\nstderr:\n%s", err, p.stderr)
	}
	want := "tool get_weather returned {\"temp_c\":21,\"sky\":\"clear\"}\n" +
		"tool get_weather failed: the station is offline\n" +
		"tool get_weather returned sunny, 30 degrees\n" +
		"echo: thanks\n"
	if got := p.stdout.String(); got != want {
		t.Errorf("stdout\n%s\nwant\n%s", got, want)
	}

	// The chat declared the tool with its description, and holds each
	// result once.
	id := p.waitChatID()
	code, body := do(t, http.MethodGet, s.url+"/api/v1/chats/"+id, s.token, "")
	if code != 200 || !strings.Contains(body, `"description":"Current weather for a city"`) {
		t.Errorf("chat: %d %s", code, body)
	}
	code, body = do(t, http.MethodGet, s.url+"/api/v1/chats/"+id+"/messages", s.token, "")
	if code != 200 || strings.Count(body, `"type":"tool-result"`) != 3 || strings.Count(body, `"is_error":true`) != 1 {
		t.Errorf("messages: %d %s", code, body)
	}
}

// TestChatToolEndOfInput: input that ends while a call waits for its result
// is an error, and the chat keeps waiting.
func TestChatToolEndOfInput(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil, nil)
	p := startChat(t, Options{URL: s.url, Token: s.token, Tools: []client.DynamicTool{weather("")}}, `/call get_weather {"city":"Lima"}`)
	p.waitFor(p.stderr, `tool call get_weather {"city":"Lima"}`)
	if err := p.wait(); err == nil || !strings.Contains(err.Error(), "end of input while tool call") {
		t.Fatalf("the session ended with %v, stderr:\n%s", err, p.stderr)
	}
	code, body := do(t, http.MethodGet, s.url+"/api/v1/chats?status=requires_action", s.token, "")
	if code != 200 || !strings.Contains(body, `"tool_name":"get_weather"`) {
		t.Errorf("the chat should still wait for the result: %d %s", code, body)
	}
}
