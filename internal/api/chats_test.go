package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

func TestChatLifecycle(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")

	plain := s.createChat(tok, nil)
	if _, err := uuid.Parse(plain.ID); err != nil {
		t.Fatalf("id %q is not a UUID", plain.ID)
	}
	if plain.Owner != "alice" || plain.Status != chat.Waiting || plain.Model != "echo" || plain.Title != "" ||
		plain.Labels == nil || plain.DynamicTools == nil || plain.Archived || plain.LastError != nil || plain.CreatedAt.IsZero() {
		t.Fatalf("chat created without a body: %+v", plain)
	}

	long := "What is the weather in Paris today, and should I take an umbrella with me tomorrow?"
	full := s.createChat(tok, map[string]any{
		"model":         "fast",
		"system_prompt": "Be brief.",
		"labels":        map[string]string{"source": "slack"},
		"message":       long,
		"dynamic_tools": []map[string]any{{"name": "get_weather", "description": "Weather",
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}},
		"tool_result_timeout": "5m",
	})
	if full.Status != chat.Pending || full.Model != "fast" || full.Labels["source"] != "slack" ||
		len(full.DynamicTools) != 1 || full.DynamicTools[0].Name != "get_weather" || full.SystemPrompt != "Be brief." {
		t.Fatalf("chat created with a message: %+v", full)
	}
	if !strings.HasSuffix(full.Title, "…") || !strings.HasPrefix(long, strings.TrimSuffix(full.Title, "…")) || len([]rune(full.Title)) > 61 {
		t.Fatalf("fallback title %q", full.Title)
	}
	msgs := s.messages(tok, full.ID)
	if len(msgs) != 1 || msgs[0].Role != chat.RoleUser || msgs[0].Parts[0].Text != long || msgs[0].ChatID != full.ID {
		t.Fatalf("first message: %+v", msgs)
	}
	titled := s.createChat(tok, map[string]any{"title": "Mine", "message": []map[string]string{{"type": "text", "text": "hi"}}})
	if titled.Title != "Mine" || titled.Status != chat.Pending {
		t.Fatalf("a given title is kept: %+v", titled)
	}

	var got chat.Chat
	s.do("GET", "/api/v1/chats/"+full.ID, tok, nil).expect(t, http.StatusOK, &got)
	if got.ID != full.ID || got.Title != full.Title || got.Status != chat.Pending || got.Labels["source"] != "slack" {
		t.Fatalf("get: %+v", got)
	}
	if l := s.listChats(tok, ""); !slices.Equal(chatIDs(l.Chats), []string{titled.ID, full.ID, plain.ID}) || l.NextCursor != "" {
		t.Fatalf("list, newest first: %v (cursor %q)", chatIDs(l.Chats), l.NextCursor)
	}

	var patched chat.Chat
	s.do("PATCH", "/api/v1/chats/"+plain.ID, tok, map[string]any{"title": "Renamed", "labels": map[string]string{"team": "a"}, "archived": true}).
		expect(t, http.StatusOK, &patched)
	if patched.Title != "Renamed" || patched.Labels["team"] != "a" || len(patched.Labels) != 1 || !patched.Archived || patched.UpdatedAt.Before(plain.UpdatedAt) {
		t.Fatalf("patch: %+v", patched)
	}
	var cleared chat.Chat
	s.do("PATCH", "/api/v1/chats/"+plain.ID, tok, map[string]any{"labels": map[string]string{}}).expect(t, http.StatusOK, &cleared)
	if len(cleared.Labels) != 0 || cleared.Title != "Renamed" || !cleared.Archived {
		t.Fatalf("patching labels alone replaces them and keeps the rest: %+v", cleared)
	}
	s.do("PATCH", "/api/v1/chats/"+plain.ID, tok, map[string]any{"title": "  "}).expectError(t, http.StatusBadRequest, "invalid_field")

	if ids := chatIDs(s.listChats(tok, "").Chats); slices.Contains(ids, plain.ID) {
		t.Fatal("archived chats are hidden by default")
	}
	if ids := chatIDs(s.listChats(tok, "?archived=true").Chats); !slices.Equal(ids, []string{plain.ID}) {
		t.Fatalf("archived=true: %v", ids)
	}
	if ids := chatIDs(s.listChats(tok, "?archived=any").Chats); len(ids) != 3 {
		t.Fatalf("archived=any: %v", ids)
	}
	s.do("GET", "/api/v1/chats?archived=maybe", tok, nil).expectError(t, http.StatusBadRequest, "invalid_query")

	r := s.do("DELETE", "/api/v1/chats/"+full.ID, tok, nil)
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	s.do("GET", "/api/v1/chats/"+full.ID, tok, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("GET", "/api/v1/chats/"+full.ID+"/messages", tok, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("DELETE", "/api/v1/chats/"+full.ID, tok, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("GET", "/api/v1/chats/not-a-uuid", tok, nil).expectError(t, http.StatusNotFound, "not_found")
}

func TestListFilters(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	waiting := s.createChat(tok, map[string]any{"labels": map[string]string{"team": "a", "env": "prod"}})
	pending := s.createChat(tok, map[string]any{"message": "hi", "labels": map[string]string{"team": "a"}})
	failed := s.createChat(tok, map[string]any{"message": "hi", "labels": map[string]string{"team": "b", "env": "prod"}})
	s.force(failed.ID, nil, store.Transition{From: chat.Pending, To: chat.Running},
		store.Transition{From: chat.Running, To: chat.Error, LastError: &chat.ChatError{Kind: "provider", Message: "boom"}})

	cases := []struct {
		query string
		want  []string
	}{
		{"?status=waiting", []string{waiting.ID}},
		{"?status=pending,error", []string{failed.ID, pending.ID}},
		{"?status=pending&status=waiting", []string{pending.ID, waiting.ID}},
		{"?status=running", []string{}},
		{"?label=team:a", []string{pending.ID, waiting.ID}},
		{"?label=team:a&label=env:prod", []string{waiting.ID}},
		{"?label=env:prod&status=error", []string{failed.ID}},
		{"?label=team:c", []string{}},
	}
	for _, tc := range cases {
		if got := chatIDs(s.listChats(tok, tc.query).Chats); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.query, got, tc.want)
		}
	}
	for _, q := range []string{"?label=team", "?label=:a", "?label=a%20b:x", "?label=team:a&label=team:b"} {
		s.do("GET", "/api/v1/chats"+q, tok, nil).expectError(t, http.StatusBadRequest, "bad_label_filter")
	}
	for _, q := range []string{"?status=bogus", "?status=waiting,", "?limit=0", "?limit=501", "?limit=x"} {
		s.do("GET", "/api/v1/chats"+q, tok, nil).expectError(t, http.StatusBadRequest, "invalid_query")
	}
	var failedGot chat.Chat
	s.do("GET", "/api/v1/chats/"+failed.ID, tok, nil).expect(t, http.StatusOK, &failedGot)
	if failedGot.LastError == nil || failedGot.LastError.Message != "boom" {
		t.Fatalf("last_error of a failed chat: %+v", failedGot.LastError)
	}
}

func TestListPagination(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	var want []string
	for i := range 7 {
		c := s.createChat(tok, map[string]any{"title": fmt.Sprint(i)})
		want = append([]string{c.ID}, want...)
	}
	var got []string
	cursor, pages := "", 0
	for {
		l := s.listChats(tok, "?limit=3&cursor="+cursor)
		pages++
		got = append(got, chatIDs(l.Chats)...)
		if l.NextCursor == "" {
			break
		}
		if pages > 3 {
			t.Fatal("pagination does not end")
		}
		cursor = l.NextCursor
	}
	if pages != 3 || !slices.Equal(got, want) {
		t.Fatalf("%d pages of %v, want 3 pages of %v", pages, got, want)
	}
	if l := s.listChats(tok, ""); len(l.Chats) != 7 || l.NextCursor != "" {
		t.Fatalf("default page: %d chats, cursor %q", len(l.Chats), l.NextCursor)
	}
	s.do("GET", "/api/v1/chats?cursor=garbage", tok, nil).expectError(t, http.StatusBadRequest, "bad_cursor")
}
