package aisdk

import (
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
)

func TestMessages(t *testing.T) {
	call := func(id, name string) chat.Part {
		return chat.Part{Type: "tool-call", ToolCallID: id, ToolName: name, Args: json.RawMessage(`{}`)}
	}
	result := func(id string, isErr bool, out string) chat.Part {
		return chat.Part{Type: "tool-result", ToolCallID: id, IsError: isErr, Output: json.RawMessage(out)}
	}
	history := []chat.Message{
		{ID: 1, Role: chat.RoleUser, Parts: []chat.Part{{Type: "text", Text: "hi"}}},
		{ID: 2, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: "reasoning", Text: "hmm"}, {Type: "text", Text: "Let me see."},
			call("s1", "clock"), call("s2", "clock"), call("d1", "rm"), call("c1", "ask")}},
		{ID: 3, Role: chat.RoleTool, Parts: []chat.Part{result("s1", false, `"noon"`), result("s2", true, `"broken"`),
			{Type: "tool-decision", ToolCallID: "d1", Decision: &chat.Decision{Approved: false, Reason: "no"}}, result("d1", true, `"denied by the user: no"`)}},
		{ID: 4, Role: chat.RoleAssistant, Parts: []chat.Part{call("a1", "rm")}},
		{ID: 5, Role: chat.RoleUser, Parts: []chat.Part{{Type: "text", Text: "and now?"}}},
		{ID: 6, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: "text", Text: "Half"}}},
	}
	pending := []chat.ToolCall{{ToolCallID: "a1", ToolName: "rm", Kind: chat.ActionApproval}, {ToolCallID: "c1", ToolName: "ask", Kind: chat.ActionClient}}
	got := Messages(history, map[string]bool{"ask": true}, pending, false, nil)
	if len(got) != 4 || got[1].ID != "msg-2" || got[1].Role != "assistant" || got[3].ID != "msg-6" {
		t.Fatalf("messages %+v", got)
	}
	states := map[string]string{}
	steps := 0
	for _, p := range got[1].Parts {
		if p.Type == "step-start" {
			steps++
		}
		if p.Type == "dynamic-tool" {
			states[p.ToolCallID] = p.State
		}
	}
	want := map[string]string{"s1": "output-available", "s2": "output-error", "d1": "output-denied", "c1": "input-available", "a1": "approval-requested"}
	for id, s := range want {
		if states[id] != s {
			t.Errorf("call %s: state %q, want %q", id, states[id], s)
		}
	}
	if steps != 2 {
		t.Errorf("%d step-start parts, want 2", steps)
	}
	// A running chat: the answer in progress is left out, the resume brings it.
	if got := Messages(history, nil, nil, true, nil); len(got) != 3 || got[2].ID != "msg-5" {
		t.Fatalf("running: %+v", got)
	}
	b, _ := json.Marshal(Messages(nil, nil, nil, false, nil))
	if string(b) != "[]" {
		t.Fatalf("empty history: %s", b)
	}
}

func TestMessagesFileParts(t *testing.T) {
	history := []chat.Message{{ID: 1, ChatID: "c1", Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("see"),
		{Type: chat.PartFile, FileID: "file_1", MediaType: "image/png", Name: "cat.png"}}}}
	got := Messages(history, nil, nil, false, nil)
	if len(got) != 1 || len(got[0].Parts) != 2 {
		t.Fatalf("messages %+v", got)
	}
	b, _ := json.Marshal(got[0].Parts[1])
	if string(b) != `{"type":"file","mediaType":"image/png","filename":"cat.png","url":"/api/v1/chats/c1/files/file_1/content"}` {
		t.Fatalf("a file part as a UIPart: %s", b)
	}
}

// TestMessagesQueued: the messages queued behind a run follow the history
// as user messages, with the turn in progress as far as it is in the
// history; a queue behind a required action is not shown (the app answers
// the action first).
func TestMessagesQueued(t *testing.T) {
	history := []chat.Message{
		{ID: 1, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("first")}},
		{ID: 2, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: "tool-call", ToolCallID: "s1", ToolName: "clock", Args: []byte(`{}`)}}},
		{ID: 3, Role: chat.RoleTool, Parts: []chat.Part{{Type: "tool-result", ToolCallID: "s1", Output: []byte(`"noon"`)}}},
	}
	queued := []chat.QueuedMessage{{ID: 7, Parts: []chat.Part{chat.TextPart("second")}}}
	got := Messages(history, nil, nil, true, queued)
	if len(got) != 3 || got[1].Role != "assistant" || got[2].ID != "queued-7" || got[2].Role != "user" || got[2].Parts[0].Text != "second" {
		t.Fatalf("running with a queue: %+v", got)
	}
	if got := Messages(history, nil, nil, false, queued); len(got) != 2 || got[1].Role != "assistant" {
		t.Fatalf("waiting for an action with a queue: %+v", got)
	}
}
