package api_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// turns is a history of n answered turns; the ids are the store's.
func turns(n int) []chat.Message {
	var msgs []chat.Message
	for i := range n {
		msgs = append(msgs,
			chat.Message{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart(fmt.Sprintf("q%d", i))}},
			chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart(fmt.Sprintf("a%d", i))}})
	}
	return msgs
}

// toWaiting is a created chat's walk from pending to waiting, as a run.
var toWaiting = []store.Transition{{From: chat.Waiting, To: chat.Pending}, {From: chat.Pending, To: chat.Running}, {From: chat.Running, To: chat.Waiting}}

// TestEditRegenerateForkCompactStatusRules: each operation answers what its
// status rules and input call for, on both stores, and a refused one writes
// nothing.
func TestEditRegenerateForkCompactStatusRules(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		tok := s.token("alice")
		c := s.createChat(tok, map[string]any{})
		s.force(c.ID, turns(2), toWaiting...)
		msgs := s.messages(tok, c.ID)
		base := "/api/v1/chats/" + c.ID

		// Wrong messages and bodies.
		s.do("PATCH", fmt.Sprintf("%s/messages/%d", base, msgs[1].ID), tok, map[string]any{"content": "x"}).expectError(t, http.StatusBadRequest, "not_a_user_message")
		s.do("PATCH", base+"/messages/999999", tok, map[string]any{"content": "x"}).expectError(t, http.StatusNotFound, "message_not_found")
		s.do("PATCH", base+"/messages/abc", tok, map[string]any{"content": "x"}).expectError(t, http.StatusBadRequest, "invalid_path")
		s.do("PATCH", fmt.Sprintf("%s/messages/%d", base, msgs[0].ID), tok, map[string]any{}).expectError(t, http.StatusBadRequest, "invalid_field")
		s.do("POST", base+"/fork", tok, map[string]any{"message_id": 999999}).expectError(t, http.StatusNotFound, "message_not_found")
		s.do("POST", base+"/fork", tok, map[string]any{}).expectError(t, http.StatusBadRequest, "invalid_field")
		other := s.token("bob")
		s.do("POST", base+"/regenerate", other, nil).expectError(t, http.StatusNotFound, "not_found")

		// Busy: 409 for each, and nothing changes.
		s.force(c.ID, nil, store.Transition{From: chat.Waiting, To: chat.Pending})
		for _, op := range []struct{ method, path string }{{"POST", "/compact"}, {"POST", "/regenerate"}, {"PATCH", fmt.Sprintf("/messages/%d", msgs[0].ID)}} {
			s.do(op.method, base+op.path, tok, map[string]any{"content": "x"}).expectError(t, http.StatusConflict, "status_conflict")
		}
		if got := s.messages(tok, c.ID); len(got) != len(msgs) || got[0].Parts[0].Text != "q0" {
			t.Fatalf("a refused operation changed the history: %+v", got)
		}
		s.force(c.ID, nil, store.Transition{From: chat.Pending, To: chat.Running}, store.Transition{From: chat.Running, To: chat.Waiting})

		// Fork at an answer: waiting, a copy up to it, labelled.
		var fork chat.Chat
		s.do("POST", base+"/fork", tok, map[string]any{"message_id": msgs[1].ID}).expect(t, http.StatusCreated, &fork)
		if fork.Status != chat.Waiting || fork.Labels["forked_from"] != c.ID || fork.Owner != c.Owner || fork.ID == c.ID {
			t.Fatalf("fork %+v", fork)
		}
		if got := s.messages(tok, fork.ID); len(got) != 2 || got[1].Parts[0].Text != "a0" {
			t.Fatalf("fork's history %+v, want q0 a0", got)
		}
		// Fork at a user message: pending, to answer it.
		s.do("POST", base+"/fork", tok, map[string]any{"message_id": msgs[2].ID}).expect(t, http.StatusCreated, &fork)
		if fork.Status != chat.Pending {
			t.Fatalf("a fork at a user message is %s, want pending", fork.Status)
		}

		// Edit the first message: a new version of it, the rest (the
		// earlier version among it) superseded.
		var edited chat.Chat
		s.do("PATCH", fmt.Sprintf("%s/messages/%d", base, msgs[0].ID), tok, map[string]any{"content": "q0 again"}).expect(t, http.StatusOK, &edited)
		if edited.Status != chat.Pending {
			t.Fatalf("edited chat is %s, want pending", edited.Status)
		}
		if got := s.messages(tok, c.ID); len(got) != 1 || got[0].Parts[0].Text != "q0 again" {
			t.Fatalf("after the edit: %+v", got)
		}
		var all struct{ Messages []chat.Message }
		s.do("GET", base+"/messages?superseded=true", tok, nil).expect(t, http.StatusOK, &all)
		if len(all.Messages) != 5 || !all.Messages[0].Superseded || all.Messages[0].Parts[0].Text != "q0" || !all.Messages[3].Superseded || all.Messages[4].Superseded {
			t.Fatalf("with superseded: %+v", all.Messages)
		}
		s.do("GET", base+"/messages?superseded=maybe", tok, nil).expectError(t, http.StatusBadRequest, "invalid_query")

		// Regenerate: the answer after the last user message is superseded.
		s.force(c.ID, []chat.Message{{Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("new a0")}}},
			store.Transition{From: chat.Pending, To: chat.Running}, store.Transition{From: chat.Running, To: chat.Waiting})
		var regen chat.Chat
		s.do("POST", base+"/regenerate", tok, nil).expect(t, http.StatusOK, &regen)
		if got := s.messages(tok, c.ID); regen.Status != chat.Pending || len(got) != 1 {
			t.Fatalf("after regenerate: %s %+v", regen.Status, got)
		}

		// Compact: one turn is nothing to compact; two are something.
		s.force(c.ID, nil, store.Transition{From: chat.Pending, To: chat.Running}, store.Transition{From: chat.Running, To: chat.Waiting})
		s.do("POST", base+"/compact", tok, nil).expectError(t, http.StatusConflict, "nothing_to_compact")
		s.force(c.ID, turns(1))
		var compacting chat.Chat
		s.do("POST", base+"/compact", tok, nil).expect(t, http.StatusAccepted, &compacting)
		if compacting.Status != chat.Pending {
			t.Fatalf("compacting chat is %s", compacting.Status)
		}
	})
}

// TestForkInsideAStepRefused: a fork point between a call and its results
// is a 400, at the assistant message and at a first tool message of two.
func TestForkInsideAStepRefused(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	c := s.createChat(tok, map[string]any{})
	call := func(id string) chat.Part {
		return chat.Part{Type: chat.PartToolCall, ToolCallID: id, ToolName: "t", Args: json.RawMessage(`{}`)}
	}
	result := func(id string) chat.Part {
		return chat.Part{Type: chat.PartToolResult, ToolCallID: id, ToolName: "t", Output: json.RawMessage(`1`)}
	}
	s.force(c.ID, []chat.Message{
		{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("go")}},
		{Role: chat.RoleAssistant, Parts: []chat.Part{call("c1"), call("c2")}},
		{Role: chat.RoleTool, Parts: []chat.Part{result("c1")}},
		{Role: chat.RoleTool, Parts: []chat.Part{result("c2")}},
		{Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("done")}},
	}, toWaiting...)
	msgs := s.messages(tok, c.ID)
	for _, at := range []int{1, 2} {
		s.do("POST", "/api/v1/chats/"+c.ID+"/fork", tok, map[string]any{"message_id": msgs[at].ID}).expectError(t, http.StatusBadRequest, "fork_inside_step")
	}
	var fork chat.Chat
	s.do("POST", "/api/v1/chats/"+c.ID+"/fork", tok, map[string]any{"message_id": msgs[3].ID}).expect(t, http.StatusCreated, &fork)
	if got := s.messages(tok, fork.ID); len(got) != 4 {
		t.Fatalf("fork after the step holds %d messages, want 4", len(got))
	}
}

// TestFortyTurnsOnASmallWindow: a chat of 40 turns on a model with a
// 3,000-token window answers every turn through the API; no request passes
// the window, the chat compacts along the way, shows where it stands
// against the window, and its transcript stays whole.
func TestFortyTurnsOnASmallWindow(t *testing.T) {
	live := func(t *testing.T, s *server) *server {
		s.live = true
		runEngine(t, s)
		return s
	}
	small := func(su *setup) {
		su.cfg = liveConfig(su.fakeURL)
		su.cfg.Models[0].ContextWindow = 3000
	}
	t.Run("SQLite", func(t *testing.T) {
		fake := llmtest.NewOpenAIChat(t)
		fortyTurns(t, fake, live(t, newSQLite(t, withFake(fake), small)))
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		fake := llmtest.NewOpenAIChat(t)
		s := newPostgres(t, pgtest.Migrated(t), "parley_test_"+strings.ToLower(rand.Text()[:10]), withFake(fake), small)
		fortyTurns(t, fake, live(t, s))
	})
}

// withFake names the fake's URL for the setups after it.
func withFake(fake *llmtest.OpenAIChat) func(*setup) {
	return func(su *setup) { su.fakeURL = fake.URL }
}

// fortyTurns talks 40 turns with the live server s, whose model is fake.
func fortyTurns(t *testing.T, fake *llmtest.OpenAIChat, s *server) {
	fake.SetContextWindow(3000)
	for i := range 200 { // answers and summaries alike
		fake.Push(llmtest.Turn{Text: fmt.Sprintf("reply %d: %s", i, strings.Repeat("r", 560))})
	}
	tok := s.token("alice")
	c := s.createChat(tok, map[string]any{})
	for i := range 40 {
		s.postText(tok, c.ID, fmt.Sprintf("turn %d: %s", i, strings.Repeat("q", 560)))
		s.waitFor(tok, c.ID, chat.Waiting)
	}
	if got := fake.MaxPromptTokens(); got > 3000 {
		t.Fatalf("a request of %d tokens passed the window", got)
	}
	msgs := s.messages(tok, c.ID)
	users, answers, compactions := 0, 0, 0
	for _, m := range msgs {
		switch {
		case chat.IsCompaction(m):
			compactions++
		case m.Role == chat.RoleUser:
			users++
		case m.Role == chat.RoleAssistant:
			answers++
		}
	}
	if users != 40 || answers != 40 || compactions < 3 {
		t.Fatalf("transcript: %d user messages, %d answers, %d compactions; want 40, 40 and several", users, answers, compactions)
	}
	var got chat.Chat
	s.do("GET", "/api/v1/chats/"+c.ID, tok, nil).expect(t, http.StatusOK, &got)
	if got.Context == nil || got.Context.Window != 3000 || got.Context.Tokens <= 0 || got.Context.Tokens > 3000 {
		t.Fatalf("context %+v", got.Context)
	}
	t.Logf("40 turns: %d compactions, %d model calls, context now %+v", compactions, len(fake.Requests()), *got.Context)

	// Compacted on request, the chat counts from the summary on, not by
	// what its last answer reported before.
	s.do("POST", "/api/v1/chats/"+c.ID+"/compact", tok, nil).expect(t, http.StatusAccepted, nil)
	s.waitFor(tok, c.ID, chat.Waiting)
	var after chat.Chat
	s.do("GET", "/api/v1/chats/"+c.ID, tok, nil).expect(t, http.StatusOK, &after)
	if after.Context == nil || after.Context.Tokens >= got.Context.Tokens {
		t.Fatalf("context after /compact %+v, want below %d", after.Context, got.Context.Tokens)
	}
}
