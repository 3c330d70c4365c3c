package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// openAtOnce releases n POSTs of body to path together, the i-th to
// replicas[i%len(replicas)], and returns their status codes once each has
// its headers (a UI message stream answers its headers once the request's
// message is written; the body is not waited for).
func openAtOnce(t *testing.T, replicas []*server, path, token string, body []byte, n int) []int {
	t.Helper()
	codes := make([]int, n)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		s := replicas[i%len(replicas)]
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), "POST", s.url+path, bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+token)
			<-release
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			codes[i] = res.StatusCode
			res.Body.Close()
		})
	}
	close(release)
	wg.Wait()
	return codes
}

// TestAISDKFirstRequestsMakeOneChat: ten first requests with one new app
// chat id, released together (across two replicas on PostgreSQL), all
// answer 200 and make one chat, which holds every message: the first in
// its history, the others there or queued.
func TestAISDKFirstRequestsMakeOneChat(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var replicas []*server
			if backend == "sqlite" {
				replicas = []*server{newSQLite(t)}
			} else {
				dsn, channel := pgtest.Migrated(t), "parley_test_"+strings.ToLower(rand.Text()[:10])
				replicas = []*server{newPostgres(t, dsn, channel), newPostgres(t, dsn, channel)}
			}
			s := replicas[0]
			tok := s.token("alice")
			body, _ := json.Marshal(map[string]any{"id": "race-1", "parley": map[string]any{"title": "t"},
				"messages": []any{userMsg("hi")}})
			const n = 10
			codes := openAtOnce(t, replicas, "/api/v1/ai-sdk/chat", tok, body, n)
			for i, c := range codes {
				if c != http.StatusOK {
					t.Fatalf("request %d answered %d: %v", i, c, codes)
				}
			}
			chats := s.listChats(tok, "").Chats
			if len(chats) != 1 {
				t.Fatalf("%d chats made of one app chat id: %v", len(chats), chatIDs(chats))
			}
			var queued struct{ Queued []chat.QueuedMessage }
			s.do("GET", "/api/v1/chats/"+chats[0].ID+"/queued", tok, nil).expect(t, http.StatusOK, &queued)
			if got := len(s.messages(tok, chats[0].ID)) + len(queued.Queued); got != n {
				t.Fatalf("the chat holds %d messages (history and queue), want %d", got, n)
			}
		})
	}
}

// TestAISDKAnotherOwnersChatID: another owner's parley chat id is not
// found on every AI SDK route, and makes no chat.
func TestAISDKAnotherOwnersChatID(t *testing.T) {
	s := newSQLite(t)
	alice, bob := s.token("alice"), s.token("bob")
	theirs := s.createChat(bob, map[string]any{"title": "bob's"})
	body, _ := json.Marshal(map[string]any{"id": theirs.ID, "messages": []any{userMsg("hi")}})
	for range 2 {
		if code := openAtOnce(t, []*server{s}, "/api/v1/ai-sdk/chat", alice, body, 1)[0]; code != http.StatusNotFound {
			t.Fatalf("POST /ai-sdk/chat with bob's chat id answered %d, want 404", code)
		}
	}
	s.do("GET", "/api/v1/ai-sdk/chat/"+theirs.ID+"/messages", alice, nil).expectError(t, http.StatusNotFound, "not_found")
	if got := s.listChats(alice, "").Chats; len(got) != 0 {
		t.Fatalf("alice has %d chats: %v", len(got), chatIDs(got))
	}
	if got := s.messages(bob, theirs.ID); len(got) != 0 {
		t.Fatalf("bob's chat got %d messages", len(got))
	}
}

// TestAISDKRefusedFirstRequestWritesNothing: a first request refused for
// its message (400), another owner's file (404) or the owner's budget (429)
// makes no chat, and the app id stays free for the next request.
func TestAISDKRefusedFirstRequestWritesNothing(t *testing.T) {
	s := newSQLite(t)
	alice, bob := s.token("alice"), s.token("bob")
	bobs := s.upload(bob, "b.png", "image/png", pngBytes)
	filePart := map[string]any{"id": "u1", "role": "user", "parts": []any{
		map[string]any{"type": "text", "text": "look"},
		map[string]any{"type": "file", "mediaType": "image/png", "url": "/api/v1/files/" + bobs.ID + "/content"}}}
	noChats := func(what string) {
		t.Helper()
		if got := s.listChats(alice, "").Chats; len(got) != 0 {
			t.Fatalf("after %s alice has %d chats", what, len(got))
		}
	}
	post := func(msg any) response {
		return s.do("POST", "/api/v1/ai-sdk/chat", alice, map[string]any{"id": "refused-1", "messages": []any{msg}})
	}
	post(userMsg(strings.Repeat("x", s.cfg.Limits.MaxMessageBytes+1))).expectError(t, http.StatusBadRequest, "invalid_field")
	noChats("a message too long")
	post(filePart).expectError(t, http.StatusNotFound, "not_found")
	noChats("another owner's file")
	s.do("POST", "/api/v1/ai-sdk/chat", alice, map[string]any{"id": "refused-1", "messages": []any{userMsg("hi")},
		"parley": map[string]any{"model": "no-such-model"}}).expectError(t, http.StatusBadRequest, "unknown_model")
	noChats("an unknown model")

	// Over the token budget: usage on a chat of alice's, then a limit under it.
	spent := s.createChat(alice, map[string]any{"title": "spent"})
	ctx := context.Background()
	if err := s.st.InTx(ctx, func(tx store.Tx) error {
		return tx.AddUsage(ctx, spent.ID, chat.Usage{InputTokens: 10, OutputTokens: 10})
	}); err != nil {
		t.Fatal(err)
	}
	s.setOverrides("alice", quota.Overrides{TokensPerDay: ptr[int64](5)})
	post(userMsg("hi")).expectError(t, http.StatusTooManyRequests, "spend_limit_exceeded")
	if got := s.listChats(alice, "").Chats; len(got) != 1 || got[0].ID != spent.ID {
		t.Fatalf("after the budget refusal alice has chats %v, want only %s", chatIDs(got), spent.ID)
	}
}

// TestForkDropsConversationLabels: a fork keeps a chat's labels but those
// by which an app finds its conversation (the AI SDK route's ai-sdk-chat,
// the Chat Completions facade's conversation).
func TestForkDropsConversationLabels(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	c := s.createChat(tok, map[string]any{"message": "hi", "labels": map[string]string{
		"app": "shop", "ai-sdk-chat": "c-1", "conversation": "k1"}})
	msgs := s.messages(tok, c.ID)
	var fork chat.Chat
	s.do("POST", "/api/v1/chats/"+c.ID+"/fork", tok, map[string]any{"message_id": msgs[0].ID}).expect(t, http.StatusCreated, &fork)
	want := map[string]string{"app": "shop", "forked_from": c.ID}
	if len(fork.Labels) != len(want) || fork.Labels["app"] != "shop" || fork.Labels["forked_from"] != c.ID {
		t.Fatalf("the fork's labels %v, want %v", fork.Labels, want)
	}
}
