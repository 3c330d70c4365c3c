package service

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/store"
)

// TestStoppingAPendingChatKeepsCallsThatMayHaveRun: a worker died after it
// recorded a step's calls, so the chat is pending with them open: a
// server-side call it may have started, a dynamic tool's call (only a
// client runs it) and a call waiting for a person's approval. Stopping the
// chat before a worker takes it, by an interrupt or by a message with busy
// "interrupt", answers the server-side call "outcome unknown" (the model
// must not repeat a side effect blindly) and cancels the two that never
// ran, in call order, and the history stays whole.
func TestStoppingAPendingChatKeepsCallsThatMayHaveRun(t *testing.T) {
	for _, how := range []string{"interrupt", "busy interrupt"} {
		t.Run(how, func(t *testing.T) {
			onBothStores(t, func(t *testing.T, st store.Store) {
				ctx := context.Background()
				cfg := config.Default()
				cfg.Models = []config.Model{{Name: "echo", Provider: "echo", Model: "echo"}}
				cfg.DefaultModel = "echo"
				ps := memory.New()
				t.Cleanup(func() { ps.Close() })
				s := New(st, ps, &cfg, nil, WithServerTools(namedTools{"add", "deploy"}))
				c, err := s.CreateChat(ctx, "alice", NewChat{Approve: chat.ToolGlobs{"deploy"},
					DynamicTools: []chat.DynamicTool{{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}}})
				if err != nil {
					t.Fatal(err)
				}
				call := func(id, name string) chat.Part {
					return chat.Part{Type: chat.PartToolCall, ToolCallID: id, ToolName: name, Args: json.RawMessage(`{}`)}
				}
				if err := st.InTx(ctx, func(tx store.Tx) error {
					for _, m := range []chat.Message{
						{ChatID: c.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("go")}},
						{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{call("c1", "ask"), call("c2", "add"), call("c3", "deploy")}},
					} {
						if err := tx.InsertMessage(ctx, &m); err != nil {
							return err
						}
					}
					_, err := tx.TransitionChat(ctx, c.ID, store.Transition{From: c.Status, To: chat.Pending})
					return err
				}); err != nil {
					t.Fatal(err)
				}

				cancelled := chat.ReasonInterrupted
				if how == "interrupt" {
					if _, err := s.Interrupt(ctx, "alice", c.ID); err != nil {
						t.Fatal(err)
					}
				} else {
					cancelled = chat.ReasonNewMessage
					if _, err := s.PostMessage(ctx, "alice", c.ID, json.RawMessage(`"stop that"`), chat.BusyInterrupt); err != nil {
						t.Fatal(err)
					}
				}
				state := stateOf(t, st, c.ID)
				if err := chat.CheckHistory(state.Chat.Status, state.Msgs, nil); err != nil {
					t.Fatalf("history: %v", err)
				}
				results := state.Msgs[2]
				want := []struct{ id, reason string }{{"c1", cancelled}, {"c2", chat.ReasonUnknownOutcome}, {"c3", cancelled}}
				if results.Role != chat.RoleTool || len(results.Parts) != len(want) {
					t.Fatalf("after the step: %+v, want one tool message with three results", results)
				}
				for i, w := range want {
					p := results.Parts[i]
					var got string
					if err := json.Unmarshal(p.Output, &got); err != nil || p.ToolCallID != w.id || got != w.reason || !p.IsError {
						t.Errorf("result %d: %s %q (error %v), want %s %q", i, p.ToolCallID, p.Output, p.IsError, w.id, w.reason)
					}
				}
			})
		})
	}
}
