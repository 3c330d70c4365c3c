package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/invariant"
)

// TestRunEndingInErrorPromotesTheQueue: a message queued while a tool
// chain runs (202) is not stranded when the run ends in error (here past
// max_steps): it goes into the history after the last step, the queue is
// empty, the chat stays in error saying why, and retry answers it.
func TestRunEndingInErrorPromotesTheQueue(t *testing.T) {
	onBothStores(t, testRunEndingInErrorPromotesTheQueue)
}

func testRunEndingInErrorPromotesTheQueue(t *testing.T, h *harness) {
	h.cfg.MaxSteps = 2
	for _, id := range []string{"ca", "cb"} {
		h.fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: id, Name: "add", Args: `{"a":1,"b":1}`}}})
	}
	h.fake.Push(llmtest.Turn{Text: "answering the queued message"})
	gate := make(chan struct{})
	arrived, first := barrier(1)
	d, _ := addTool(t, gate, arrived)
	h.start(d)
	c := h.create("loop")
	await(t, first, "the first tool call")
	res, err := h.svc.PostMessage(context.Background(), owner, c.ID, json.RawMessage(`"and then stop"`), chat.BusyQueue)
	if err != nil || res.Queued == nil {
		t.Fatalf("post while running: %+v, %v; want it queued", res, err)
	}
	close(gate)

	got := h.waitStatus(c.ID, chat.Error)
	if got.LastError == nil || got.LastError.Kind != "max_steps" {
		t.Fatalf("last_error %+v, want max_steps", got.LastError)
	}
	if q, err := h.st.ListQueued(context.Background(), c.ID); err != nil || len(q) != 0 {
		t.Fatalf("queued after the run ended in error: %+v, %v", q, err)
	}
	msgs := h.history(c.ID)
	if err := chat.CheckHistory(got.Status, msgs, invariant.MayWait(got, msgs)); err != nil {
		t.Fatal(err)
	}
	if last := msgs[len(msgs)-1]; last.Role != chat.RoleUser || last.Parts[0].Text != "and then stop" {
		t.Fatalf("the history ends with %+v, want the queued message", last)
	}

	if _, err := h.svc.Retry(context.Background(), owner, c.ID); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(c.ID, chat.Waiting)
	msgs = h.history(c.ID)
	if last := msgs[len(msgs)-1]; last.Role != chat.RoleAssistant || last.Parts[0].Text != "answering the queued message" {
		t.Fatalf("after retry the history ends with %+v, want the answer", last)
	}
}
