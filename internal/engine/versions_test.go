package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestEditAndRegenerateAfterACompaction, on both stores: a chat compacted
// on request, then edited at its last question and regenerated. The edit
// keeps the question's earlier text as a superseded version of the new
// one, and the compaction (it summarises only what came before) stays in
// force after the new version; each run's request holds the summary and
// what stays verbatim, never a superseded message; a regeneration keeps
// the earlier answer as a version of the new one.
func TestEditAndRegenerateAfterACompaction(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		c := h.turnsChat(3, 100)
		h.fake.Push(llmtest.Turn{Text: "MANUAL-SUMMARY"}, llmtest.Turn{Text: "answer to the edit"}, llmtest.Turn{Text: "answer again"})
		h.startOn(h.st, h.ps, h.windowed(0), nil)
		if _, err := h.svc.Compact(ctx, owner, c.ID); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(c.ID, chat.Waiting)
		before := h.history(c.ID)
		question, answer := before[4], before[5]

		raw, _ := json.Marshal("question-C, edited")
		if _, err := h.svc.EditMessage(ctx, owner, c.ID, question.ID, raw); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(c.ID, chat.Waiting)
		msgs := h.history(c.ID)
		if len(msgs) != 7 || msgs[4].Parts[0].Text != "question-C, edited" || msgs[4].ID <= before[6].ID ||
			!chat.IsCompaction(msgs[5]) || msgs[5].Parts[0].ThroughMessageID != before[3].ID || msgs[6].Parts[0].Text != "answer to the edit" {
			t.Fatalf("after the edit: %+v", msgs)
		}
		versions, err := h.svc.MessageVersions(ctx, owner, c.ID, msgs[4].ID)
		if err != nil || len(versions) != 2 || versions[0].ID != question.ID || versions[0].Parts[0].Text != question.Parts[0].Text ||
			!versions[0].Superseded || versions[1].ID != msgs[4].ID {
			t.Fatalf("versions of the edited question: %+v, %v", versions, err)
		}

		if _, err := h.svc.Regenerate(ctx, owner, c.ID); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(c.ID, chat.Waiting)
		last := h.history(c.ID)
		if len(last) != 7 || last[6].Parts[0].Text != "answer again" {
			t.Fatalf("after regenerating: %+v", last)
		}
		versions, err = h.svc.MessageVersions(ctx, owner, c.ID, last[6].ID)
		if err != nil || len(versions) != 2 || versions[0].ID != msgs[6].ID || !versions[0].Superseded || versions[1].ID != last[6].ID {
			t.Fatalf("versions of the regenerated answer: %+v, %v", versions, err)
		}

		reqs := h.fake.Requests()
		if len(reqs) != 3 {
			t.Fatalf("%d model calls, want 3", len(reqs))
		}
		for i, r := range reqs[1:] {
			text := requestText(r)
			if !strings.Contains(text, "MANUAL-SUMMARY") || !strings.Contains(text, "question-C, edited") {
				t.Errorf("request %d lacks the summary or the edited question: %s", i+2, text)
			}
			for _, gone := range []string{question.Parts[0].Text, answer.Parts[0].Text, turnText("question", 0, 100)} {
				if strings.Contains(text, gone) {
					t.Errorf("request %d holds %.20q, superseded or summarised", i+2, gone)
				}
			}
		}
		if strings.Contains(requestText(reqs[2]), "answer to the edit") {
			t.Errorf("the regeneration's request holds the answer it replaces")
		}
	})
}
