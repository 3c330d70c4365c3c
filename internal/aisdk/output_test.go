package aisdk

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
)

// repairOf is parley's request to repair an answer.
func repairOf(id int64) chat.Message {
	return chat.Message{ID: id, Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartOutputRepair, Text: "answer again in JSON"}}}
}

// TestRepairIsPartOfTheAnswer: a request to repair a structured output is
// not a person's message: the UI messages leave it out, the answer before
// it and the one after it being one assistant message, and a stream goes
// on past it to the repaired answer.
func TestRepairIsPartOfTheAnswer(t *testing.T) {
	history := []chat.Message{
		{ID: 1, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("total?")}},
		{ID: 2, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("three")}},
		repairOf(3),
		{ID: 4, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart(`{"total":3}`), {Type: chat.PartOutput, JSON: []byte(`{"total":3}`)}}},
	}
	got := Messages(history, nil, nil, false, nil)
	if len(got) != 2 || got[0].Role != "user" || got[1].Role != "assistant" || got[1].ID != "msg-2" {
		t.Fatalf("messages %+v; want the question and one answer", got)
	}
	// While the repaired answer runs, the turn in progress (which the
	// stream shows) starts after the person's message, not after the
	// repair request.
	if running := Messages(history[:3], nil, nil, true, nil); len(running) != 1 || running[0].Role != "user" {
		t.Fatalf("running messages %+v", running)
	}

	out := feed(t, NewMapper("", nil), nil,
		status(chat.Running, nil),
		message(history[1]),
		message(repairOf(3)),
		message(history[3]),
		status(chat.Waiting, nil))
	var text []string
	for _, c := range out {
		if c["type"] == "text-delta" {
			text = append(text, c["delta"].(string))
		}
	}
	if strings.Join(text, "") != `three{"total":3}` || out[len(out)-1]["finishReason"] != FinishStop {
		t.Fatalf("chunks %v; want both answers, then the finish", out)
	}
}
