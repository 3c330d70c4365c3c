package aisdk

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
)

type ev struct {
	kind string
	data any
}

func status(s chat.Status, c *chat.Chat) ev {
	return ev{events.KindStatus, map[string]any{"status": s, "chat": c}}
}
func delta(msg int64, d events.Delta) ev {
	return ev{events.KindPart, map[string]any{"message_id": msg, "part": d}}
}
func message(m chat.Message) ev { return ev{events.KindMessage, map[string]any{"message": m}} }

// feed runs evs through a Mapper and checks the chunks as the AI SDK's
// reader would: every delta and end follows its start, every tool chunk
// names a call the stream showed (or one of known), nothing follows finish.
func feed(t *testing.T, m *Mapper, known []string, evs ...ev) []Chunk {
	t.Helper()
	var out []Chunk
	for _, e := range evs {
		b, _ := json.Marshal(e.data)
		cs, err := m.Event(e.kind, b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cs...)
	}
	open := map[string]bool{}
	calls := map[string]bool{}
	for _, k := range known {
		calls[k] = true
	}
	for i, c := range out {
		typ := c["type"].(string)
		if i == 0 && typ != "start" {
			t.Fatalf("first chunk %v", c)
		}
		if i > 0 && typ == "start" {
			t.Fatalf("a second start at %d", i)
		}
		switch typ {
		case "text-start", "reasoning-start":
			open[c["id"].(string)] = true
		case "text-delta", "reasoning-delta", "text-end", "reasoning-end":
			if !open[c["id"].(string)] {
				t.Fatalf("%s before its start: %v", typ, out)
			}
			if strings.HasSuffix(typ, "-end") {
				delete(open, c["id"].(string))
			}
		case "tool-input-start", "tool-input-available":
			calls[c["toolCallId"].(string)] = true
		case "tool-input-delta", "tool-output-available", "tool-output-error", "tool-output-denied", "tool-approval-request":
			if !calls[c["toolCallId"].(string)] {
				t.Fatalf("%s of an unknown call: %v", typ, out)
			}
		case "finish":
			if i != len(out)-1 || len(open) != 0 {
				t.Fatalf("finish not last or parts open: %v", out)
			}
		}
	}
	return out
}

func types(cs []Chunk) string {
	var s []string
	for _, c := range cs {
		s = append(s, c["type"].(string))
	}
	return strings.Join(s, ",")
}

func text(id int64, s string) events.Delta { return events.Delta{Type: events.DeltaText, Text: s} }
func reasoning(id int64, s string) events.Delta {
	return events.Delta{Type: events.DeltaReasoning, Text: s}
}

func TestMapperEveryEvent(t *testing.T) {
	client := map[string]bool{"ask": true}
	pending := &chat.Chat{Status: chat.RequiresAction, RequiredAction: &chat.RequiredAction{ToolCalls: []chat.ToolCall{
		{ToolCallID: "c2", ToolName: "ask", Kind: chat.ActionClient},
		{ToolCallID: "c3", ToolName: "rm", Kind: chat.ActionApproval, Args: json.RawMessage(`{}`)},
	}}}
	m := NewMapper("", client)
	out := feed(t, m, nil,
		status(chat.Pending, nil),
		status(chat.Running, nil),
		delta(5, reasoning(5, "hmm")),
		delta(5, text(5, "Hel")),
		delta(5, text(5, "lo")),
		delta(5, events.Delta{Type: events.DeltaToolCallStart, Index: 0, ToolCallID: "c1", ToolName: "clock"}),
		delta(5, events.Delta{Type: events.DeltaToolCallDelta, Index: 0, Text: "{}"}),
		message(chat.Message{ID: 5, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: "reasoning", Text: "hmm"}, {Type: "text", Text: "Hello"},
			{Type: "tool-call", ToolCallID: "c1", ToolName: "clock", Args: json.RawMessage(`{}`)}}}),
		ev{events.KindToolProgress, nil}, // not a public kind: ignored
		delta(5, events.Delta{Type: "tool-progress", ToolCallID: "c1", ToolName: "clock", Text: ""}),
		message(chat.Message{ID: 6, Role: chat.RoleTool, Parts: []chat.Part{{Type: "tool-result", ToolCallID: "c1", ToolName: "clock", Output: json.RawMessage(`"noon"`)}}}),
		ev{events.KindRetry, map[string]any{"attempt": 2}},
		message(chat.Message{ID: 7, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: "text", Text: "Checking"},
			{Type: "tool-call", ToolCallID: "c2", ToolName: "ask", Args: json.RawMessage(`{"q":1}`)},
			{Type: "tool-call", ToolCallID: "c3", ToolName: "rm", Args: json.RawMessage(`{}`)}}}),
		ev{events.KindActionRequired, map[string]any{"tool_calls": pending.RequiredAction.ToolCalls}},
		status(chat.RequiresAction, pending),
		status(chat.Waiting, nil), // after finish: nothing
	)
	want := "start,start-step,reasoning-start,reasoning-delta,reasoning-end,text-start,text-delta,text-delta,text-end," +
		"tool-input-start,tool-input-delta,tool-input-available,data-tool-progress,tool-output-available," +
		"finish-step,start-step,text-start,text-delta,text-end,tool-input-available,tool-input-available,tool-approval-request,finish-step,finish"
	if got := types(out); got != want {
		t.Fatalf("chunks\n got %s\nwant %s", got, want)
	}
	if out[0]["messageId"] != "msg-5" || out[len(out)-1]["finishReason"] != FinishToolCalls {
		t.Fatalf("start %v, finish %v", out[0], out[len(out)-1])
	}
	if out[11]["providerExecuted"] != true || out[19]["providerExecuted"] != false || out[21]["approvalId"] != "c3" {
		t.Fatalf("tool chunks %v %v %v", out[11], out[19], out[21])
	}
	if out[12]["transient"] != true || out[12]["id"] != "c1" {
		t.Fatalf("progress %v", out[12])
	}
	if !m.Done() {
		t.Fatal("not done after finish")
	}
}

func TestMapperDeniedAndError(t *testing.T) {
	// An approval continuation: the call was shown by an earlier stream.
	out := feed(t, NewMapper("a1", nil), []string{"c3"},
		status(chat.Pending, nil),
		message(chat.Message{ID: 8, Role: chat.RoleTool, Parts: []chat.Part{
			{Type: "tool-decision", ToolCallID: "c3", Decision: &chat.Decision{Approved: false, Reason: "no"}},
			{Type: "tool-result", ToolCallID: "c3", ToolName: "rm", IsError: true, Output: json.RawMessage(`"denied by the user: no"`)}}}),
		status(chat.Running, nil),
		delta(9, text(9, "OK")),
		ev{events.KindError, map[string]any{"kind": "provider", "message": "boom"}},
		status(chat.Error, &chat.Chat{Status: chat.Error, LastError: &chat.ChatError{Message: "boom"}}),
	)
	want := "start,tool-output-denied,start-step,text-start,text-delta,error,text-end,finish-step,finish"
	if got := types(out); got != want {
		t.Fatalf("chunks\n got %s\nwant %s", got, want)
	}
	if out[0]["messageId"] != "a1" || out[5]["errorText"] != "boom" || out[8]["finishReason"] != FinishError {
		t.Fatalf("chunks %v", out)
	}
}

// A resumed stream (the durable first step, then the second step's deltas
// from a snapshot) gives the parts the ids the live stream gave them.
func TestMapperResumeKeepsIDs(t *testing.T) {
	step1 := chat.Message{ID: 5, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: "text", Text: "Hello"}}}
	liveOut := feed(t, NewMapper("", nil), nil, status(chat.Running, nil),
		delta(5, text(5, "Hel")), delta(5, text(5, "lo")), message(step1), delta(7, text(7, "More")))
	resumed := feed(t, NewMapper("", nil), nil, status(chat.Running, nil), message(step1), delta(7, text(7, "More")))
	ids := func(cs []Chunk) string {
		var s []string
		for _, c := range cs {
			if c["type"] == "text-start" || c["type"] == "start" {
				s = append(s, fmt.Sprint(c["id"], c["messageId"]))
			}
		}
		return strings.Join(s, " ")
	}
	if ids(liveOut) != ids(resumed) || ids(liveOut) != "<nil>msg-5 text-5-1<nil> text-7-1<nil>" {
		t.Fatalf("live %s, resumed %s", ids(liveOut), ids(resumed))
	}
}

func TestMapperResync(t *testing.T) {
	out := feed(t, NewMapper("", nil), nil, status(chat.Running, nil), delta(5, text(5, "Hi")), ev{KindResync, map[string]any{}})
	if got := types(out); got != "start,start-step,text-start,text-delta,error,text-end,finish-step,finish" {
		t.Fatalf("chunks %s", got)
	}
}

// TestMapperQueuedTogether: messages queued behind a run enter the history
// together; a stream waiting for one of them carries the answer to all,
// and is not ended by the others.
func TestMapperQueuedTogether(t *testing.T) {
	m := NewMapper("", nil)
	m.AfterQueued()
	user := func(id int64) ev {
		return message(chat.Message{ID: id, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("q")}})
	}
	out := feed(t, m, nil,
		status(chat.Running, nil),
		message(chat.Message{ID: 2, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("skipped")}}),
		user(3), user(4),
		message(chat.Message{ID: 5, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("both")}}),
		status(chat.Waiting, nil))
	var text []string
	for _, c := range out {
		if c["type"] == "text-delta" {
			text = append(text, c["delta"].(string))
		}
	}
	if strings.Join(text, "") != "both" || out[len(out)-1]["finishReason"] != FinishStop {
		t.Fatalf("chunks %v", out)
	}
}
