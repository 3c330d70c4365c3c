package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestBrowserBudget: an owner whose daily token budget is used up sees,
// in words, that a message was refused and when the budget resets, and a
// chat that the budget stopped between two steps shows "Budget reached"
// with a way on (Retry).
func TestBrowserBudget(t *testing.T) {
	t.Parallel()
	u := startUI(t, "quotas:\n  defaults:\n    tokens_per_day: 100\n")
	b := newBrowser(t, desktop)

	// The first step asks the client for a tool and uses the whole budget;
	// the step after the client's result is refused before its model call.
	u.fake.Push(llmtest.Turn{
		ToolCalls: []llmtest.ToolCall{{ID: "call_b1", Name: "lookup", Args: `{"q":"x"}`}},
		Usage:     llmtest.Usage{InputTokens: 90, OutputTokens: 30},
	})
	id := u.createChat(t, `{"title": "budget", "message": "Look it up.",
		"dynamic_tools": [{"name": "lookup", "description": "Look something up",
			"input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]}`)
	b.openChat(u, id)
	b.waitStatus("requires_action")
	code, body := do(t, http.MethodPost, u.url+"/api/v1/chats/"+id+"/tool-results", u.token,
		`{"results": [{"tool_call_id": "call_b1", "output": "found"}]}`)
	if code != http.StatusOK {
		t.Fatalf("post the tool result: %d %s", code, body)
	}
	b.waitStatus("error")
	b.waitText("the stop is named plainly", "#chat-error .error-kind", `t.trim() === "Budget reached"`)
	b.waitText("the stop says when the budget resets", "#chat-error .error-message", `t.includes("resets")`)
	b.visible("#retry")
	code, body = get(t, u.url+"/api/v1/chats/"+id, u.token)
	var c chat.Chat
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil || c.LastError == nil || c.LastError.Kind != "spend_limit" {
		t.Fatalf("the chat through the API: %d %s", code, body)
	}
	if n := len(u.fake.Requests()); n != 1 {
		t.Errorf("the model got %d requests, want 1: the step after the budget was used up must not call it", n)
	}

	// A new message is refused in words, and nothing is stored.
	b.allow(`status of 429 .*/messages`)
	before := b.count("#messages li.msg")
	b.typeInto("#composer-input", "and now?\r")
	b.waitText("the refusal is shown in words", "#composer-error",
		`t.includes("daily token limit of 100 tokens is reached") && t.includes("120 tokens used") && t.includes("resets")`)
	if v := b.text("#composer-error"); strings.Contains(v, "spend_limit_exceeded") || strings.Contains(v, "micros") {
		t.Errorf("the refusal shows the server's wording: %q", v)
	}
	if after := b.count("#messages li.msg"); after != before {
		t.Errorf("%d messages shown after the refusal, want %d", after, before)
	}
	b.screenshot("budget")
}
