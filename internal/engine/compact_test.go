package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/llm/openai"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// windowed is the harness's model with a context window of window tokens
// (0: unknown), compacting at 0.8 of it when known.
func (h *harness) windowed(window int64) models {
	p := openai.NewChat(openai.Config{BaseURL: h.fake.URL, APIKey: "test-key"})
	m := llm.Model{Name: "fake", Provider: p, ModelID: "gpt-test", ContextWindow: window}
	if window > 0 {
		m.CompactAt = 0.8
	}
	return models{"fake": m}
}

// turnsChat makes a waiting chat whose history is n turns, each a user
// message and an answer of size characters, and returns it.
func (h *harness) turnsChat(n, size int, dyn ...chat.DynamicTool) chat.Chat {
	h.t.Helper()
	c, err := h.svc.CreateChat(context.Background(), owner, turnsNewChat(dyn...))
	if err != nil {
		h.t.Fatal(err)
	}
	_, err = h.st.InTx(context.Background(), func(tx store.Tx) error {
		for i := range n {
			for _, m := range []chat.Message{
				{ChatID: c.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart(turnText("question", i, size))}},
				{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart(turnText("answer", i, size))}},
			} {
				if err := tx.InsertMessage(context.Background(), &m); err != nil {
					return err
				}
			}
		}
		return nil
	}), error(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// send posts a user message.
func (h *harness) send(id, text string) {
	h.t.Helper()
	raw, _ := json.Marshal(text)
	if _, err := h.svc.PostMessage(context.Background(), owner, id, raw, ""); err != nil {
		h.t.Fatal(err)
	}
}

func turnText(kind string, i, size int) string {
	head := kind + "-" + string(rune('A'+i)) + " "
	return head + strings.Repeat("w", max(0, size-len(head)))
}

// compactions returns the chat's compaction parts, oldest first.
func (h *harness) compactions(id string) []chat.Part {
	var out []chat.Part
	for _, m := range h.history(id) {
		if chat.IsCompaction(m) {
			out = append(out, m.Parts[0])
		}
	}
	return out
}

// requestText is everything a request sent to the model says.
func requestText(r llmtest.Request) string { return string(r.Body) }

// TestCompactsBeforeTheStepThatWouldPassTheThreshold: a chat near its
// model's window is summarised first (a call without tools over the older
// turns), the answer's request starts with the summary and keeps the last
// turn verbatim, and no request passes the window.
func TestCompactsBeforeTheStepThatWouldPassTheThreshold(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		h.fake.SetContextWindow(3000)
		c := h.turnsChat(4, 1200) // ~2,400 tokens
		h.fake.Push(llmtest.Turn{Text: "SUMMARY-ONE"}, llmtest.Turn{Text: "the answer"})
		h.startOn(h.st, h.ps, h.windowed(3000), nil)
		h.send(c.ID, "what next?")
		h.waitStatus(c.ID, chat.Waiting)

		reqs := h.waitRequests(2)
		if !strings.Contains(requestText(reqs[0]), "summarise a conversation") || strings.Contains(requestText(reqs[0]), `"tools"`) {
			t.Fatalf("the first request is not a summarising call without tools: %.300s", reqs[0].Body)
		}
		answer := requestText(reqs[1])
		if !strings.Contains(answer, "SUMMARY-ONE") || strings.Contains(answer, "question-A") || !strings.Contains(answer, "what next?") {
			t.Fatalf("the answer's request does not start from the summary and keep the last turn: %.600s", answer)
		}
		if got := h.fake.MaxPromptTokens(); got > 3000 {
			t.Fatalf("a request of %d tokens passed the window of 3000", got)
		}
		cs := h.compactions(c.ID)
		if len(cs) != 1 || cs[0].Source != chat.CompactAuto || cs[0].Summary != "SUMMARY-ONE" || cs[0].ContextWindow != 3000 || cs[0].TokensBefore < 2400 {
			t.Fatalf("compactions %+v, want one auto summary measured against 3000", cs)
		}
		got, err := h.svc.GetChat(context.Background(), owner, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Usage.InputTokens == 0 || got.Usage.InputTokens < reqs[0].PromptTokens {
			t.Fatalf("the compaction's usage is not counted: %+v", got.Usage)
		}
	})
}

// TestOverflowCompactsAndRetriesOnce: a model whose window parley does not
// know answers "context too long"; the step is summarised and made again.
func TestOverflowCompactsAndRetriesOnce(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		h.fake.SetContextWindow(2000)
		c := h.turnsChat(3, 1200) // ~1,800 tokens: with the new message and the envelope, over 2,000
		h.fake.Push(llmtest.Turn{Text: "SUMMARY-OVERFLOW"}, llmtest.Turn{Text: "answered after all"})
		h.startOn(h.st, h.ps, h.windowed(0), nil)
		h.send(c.ID, "and now? "+strings.Repeat("x", 800))
		h.waitStatus(c.ID, chat.Waiting)

		// The step is refused; the summarising call may be too, and is then
		// made again over half the transcript; the step made again is answered.
		reqs := h.fake.Requests()
		if !reqs[0].OverWindow || reqs[len(reqs)-1].OverWindow || reqs[len(reqs)-2].OverWindow {
			t.Fatalf("want the step refused, then the summary and the step answered: %d requests", len(reqs))
		}
		cs := h.compactions(c.ID)
		if len(cs) != 1 || cs[0].Source != chat.CompactOverflow || cs[0].ContextWindow != 0 {
			t.Fatalf("compactions %+v, want one from the overflow", cs)
		}
		msgs := h.history(c.ID)
		if last := msgs[len(msgs)-1]; last.Parts[0].Text != "answered after all" {
			t.Fatalf("last message %+v", last)
		}
	})
}

// TestOverflowWithNothingToCompactSaysWhatToDo: a single turn too long
// for the model cannot be summarised: the chat ends in error, with the
// kind and a message naming the ways on, and a shorter edit answers.
func TestOverflowWithNothingToCompactSaysWhatToDo(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		h.fake.SetContextWindow(500)
		h.startOn(h.st, h.ps, h.windowed(0), nil)
		c := h.create(strings.Repeat("far too long ", 400))
		got := h.waitStatus(c.ID, chat.Error)
		if got.LastError.Kind != llm.KindContextLength || !strings.Contains(got.LastError.Message, "Edit") || got.LastError.Retryable {
			t.Fatalf("last_error %+v", got.LastError)
		}
		if n := len(h.compactions(c.ID)); n != 0 {
			t.Fatalf("%d compactions of a single turn", n)
		}

		h.fake.Push(llmtest.Turn{Text: "short answer"})
		first := h.history(c.ID)[0]
		raw, _ := json.Marshal("short")
		if _, err := h.svc.EditMessage(context.Background(), owner, c.ID, first.ID, raw); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(c.ID, chat.Waiting)
		msgs := h.history(c.ID)
		if len(msgs) != 2 || msgs[1].Parts[0].Text != "short answer" {
			t.Fatalf("after the edit: %+v", msgs)
		}
	})
}

// TestCompactOnRequest: POST /compact summarises everything before the
// last turn, answers nothing, and the chat waits again; a second one has
// nothing left to compact.
func TestCompactOnRequest(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		c := h.turnsChat(3, 100)
		h.fake.Push(llmtest.Turn{Text: "MANUAL-SUMMARY"})
		h.startOn(h.st, h.ps, h.windowed(0), nil)
		if _, err := h.svc.Compact(context.Background(), owner, c.ID); err != nil {
			t.Fatal(err)
		}
		got := h.waitStatus(c.ID, chat.Waiting)
		if got.CompactRequested {
			t.Fatal("the request stays on the chat after its run")
		}
		if n := len(h.fake.Requests()); n != 1 {
			t.Fatalf("%d model calls, want the one summary", n)
		}
		cs := h.compactions(c.ID)
		msgs := h.history(c.ID)
		if len(cs) != 1 || cs[0].Source != chat.CompactManual || cs[0].ThroughMessageID != msgs[3].ID {
			t.Fatalf("compactions %+v, want one manual through message %d (the last turn kept)", cs, msgs[3].ID)
		}
		if _, err := h.svc.Compact(context.Background(), owner, c.ID); err == nil || !strings.Contains(err.Error(), "nothing to compact") {
			t.Fatalf("second compact: %v, want nothing to compact", err)
		}
	})
}

// TestInterruptDuringCompaction: the summarising call is stopped, nothing
// is written of it, and the chat waits with a whole history.
func TestInterruptDuringCompaction(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		c := h.turnsChat(3, 100)
		gate, started := make(chan struct{}), make(chan struct{}, 1)
		defer close(gate)
		h.fake.Push(llmtest.Turn{Text: "never", Gate: gate, Started: started})
		h.startOn(h.st, h.ps, h.windowed(0), nil)
		if _, err := h.svc.Compact(context.Background(), owner, c.ID); err != nil {
			t.Fatal(err)
		}
		<-started
		if _, err := h.svc.Interrupt(context.Background(), owner, c.ID); err != nil {
			t.Fatal(err)
		}
		got := h.waitStatus(c.ID, chat.Waiting)
		if got.CompactRequested || len(h.compactions(c.ID)) != 0 {
			t.Fatalf("an interrupted compaction left a summary or its request: %+v", h.compactions(c.ID))
		}
	})
}

// TestShutdownDuringCompactionCompactsOnce: the worker stops while it
// summarises; the next one summarises again, and the chat has exactly one
// summary.
func TestShutdownDuringCompactionCompactsOnce(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		c := h.turnsChat(3, 100)
		gate, started := make(chan struct{}), make(chan struct{}, 1)
		defer close(gate)
		h.fake.Push(llmtest.Turn{Text: "lost", Gate: gate, Started: started})
		stop := h.startOn(h.st, h.ps, h.windowed(0), nil)
		if _, err := h.svc.Compact(context.Background(), owner, c.ID); err != nil {
			t.Fatal(err)
		}
		<-started
		stop()
		if got := h.waitStatus(c.ID, chat.Pending); !got.CompactRequested {
			t.Fatal("the handed-back chat lost its compaction request")
		}
		h.fake.Push(llmtest.Turn{Text: "THE-SUMMARY"})
		h.startOn(h.st, h.ps, h.windowed(0), nil)
		h.waitStatus(c.ID, chat.Waiting)
		if cs := h.compactions(c.ID); len(cs) != 1 || cs[0].Summary != "THE-SUMMARY" {
			t.Fatalf("compactions %+v, want exactly one", cs)
		}
	})
}

// TestNoCompactionWhileCallsWait: a chat waiting for a client's result
// is not compacted; once the result passes the threshold, the history is
// summarised before the next step, and the call stays with its result in
// the turn kept verbatim.
func TestNoCompactionWhileCallsWait(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		h.fake.SetContextWindow(3000)
		c := h.turnsChat(4, 1000, chat.DynamicTool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)})
		h.fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "ask", Args: `{}`}}})
		h.startOn(h.st, h.ps, h.windowed(3000), nil)
		h.send(c.ID, "go")
		h.waitStatus(c.ID, chat.RequiresAction)
		if n := len(h.compactions(c.ID)); n != 0 {
			t.Fatalf("%d compactions while a call waits", n)
		}

		h.fake.Push(llmtest.Turn{Text: "SUMMARY"}, llmtest.Turn{Text: "done"})
		out, _ := json.Marshal(strings.Repeat("r", 6000))
		if _, err := h.svc.SubmitToolResults(context.Background(), owner, c.ID, []service.ToolResult{{ToolCallID: "c1", Output: out}}); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(c.ID, chat.Waiting)
		reqs := h.waitRequests(3)
		last := requestText(reqs[2])
		if !strings.Contains(last, "SUMMARY") || !strings.Contains(last, `"tool_call_id":"c1"`) || strings.Contains(last, "question-A") {
			t.Fatalf("the step after the result does not start from the summary with the call and its result: %.400s", last)
		}
		if got := h.fake.MaxPromptTokens(); got > 3000 {
			t.Fatalf("a request of %d tokens passed the window", got)
		}
	})
}

// turnsNewChat is the chat turnsChat makes, with dynamic tools.
func turnsNewChat(dyn ...chat.DynamicTool) service.NewChat {
	return service.NewChat{Title: "long chat", DynamicTools: dyn}
}

// TestWorkerKilledDuringCompactionCompactsOnce: the worker that summarises
// dies (its writes and renewals hang) before it records the summary; the
// worker that recovers the chat summarises again, and the chat has exactly
// one summary.
func TestWorkerKilledDuringCompactionCompactsOnce(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		c := h.turnsChat(3, 100)
		h.fake.Push(llmtest.Turn{Text: "THE-SUMMARY"}, llmtest.Turn{Text: "THE-SUMMARY"})
		dead := newDeadStore(t, h.st, 0)
		dying := h.cfg
		dying.LeaseTTL = 300 * time.Millisecond
		h.startOn(dead, h.ps, h.windowed(0), nil, dying)
		if _, err := h.svc.Compact(context.Background(), owner, c.ID); err != nil {
			t.Fatal(err)
		}
		await(t, dead.died, "the first worker's death")
		h.startOn(h.st, h.ps, h.windowed(0), nil)
		h.waitStatus(c.ID, chat.Waiting)
		if cs := h.compactions(c.ID); len(cs) != 1 || cs[0].Source != chat.CompactManual {
			t.Fatalf("compactions %+v, want exactly one", cs)
		}
	})
}

// TestMessageAfterCompactIsAnswered: while a requested compaction waits
// (the chat pending), a message sent with busy "interrupt", or a queued
// message that an interrupt promotes, goes into the history; the run
// summarises, then answers that message, and the chat waits with the
// answer last.
func TestMessageAfterCompactIsAnswered(t *testing.T) {
	for _, how := range []string{"busy interrupt", "queued then interrupt"} {
		t.Run(how, func(t *testing.T) {
			onBothStores(t, func(t *testing.T, h *harness) {
				ctx := context.Background()
				c := h.turnsChat(3, 100)
				if _, err := h.svc.Compact(ctx, owner, c.ID); err != nil {
					t.Fatal(err)
				}
				busy := chat.BusyInterrupt
				if how != "busy interrupt" {
					busy = chat.BusyQueue
				}
				if _, err := h.svc.PostMessage(ctx, owner, c.ID, json.RawMessage(`"the new question"`), busy); err != nil {
					t.Fatal(err)
				}
				if busy == chat.BusyQueue {
					if _, err := h.svc.Interrupt(ctx, owner, c.ID); err != nil {
						t.Fatal(err)
					}
				}
				if got, err := h.st.GetChat(ctx, c.ID); err != nil || got.Status != chat.Pending || !got.CompactRequested {
					t.Fatalf("before a worker takes it: %+v, %v; want pending, asked to compact", got, err)
				}
				h.fake.Push(llmtest.Turn{Text: "THE-SUMMARY"}, llmtest.Turn{Text: "THE-ANSWER"})
				h.startOn(h.st, h.ps, h.windowed(0), nil)
				got := h.waitStatus(c.ID, chat.Waiting)
				msgs := h.history(c.ID)
				if err := chat.CheckHistory(got.Status, msgs, nil); err != nil {
					t.Fatal(err)
				}
				last := msgs[len(msgs)-1]
				if last.Role != chat.RoleAssistant || last.Parts[0].Text != "THE-ANSWER" {
					t.Fatalf("the history ends with %+v, want the answer to the new message", last)
				}
				if cs := h.compactions(c.ID); len(cs) != 1 || cs[0].Summary != "THE-SUMMARY" || got.CompactRequested {
					t.Fatalf("compactions %+v (request left %v), want the one summary", cs, got.CompactRequested)
				}
				if answer := requestText(h.fake.Requests()[1]); !strings.Contains(answer, "THE-SUMMARY") || !strings.Contains(answer, "the new question") {
					t.Fatalf("the answer's request does not start from the summary with the question: %.400s", answer)
				}
			})
		})
	}
}
