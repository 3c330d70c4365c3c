package service

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
)

// TestPostAppMessage: the first message of an app chat id creates the chat
// the caller named and binds the id to it; a later one with another chat
// id in mind is ErrAppChatMoved and writes nothing; another owner's chat
// id is not found.
func TestPostAppMessage(t *testing.T) {
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "echo", Provider: "echo", Model: "echo"}}
	cfg.DefaultModel = "echo"
	ps := memory.New()
	defer ps.Close()
	st := sqlitetest.Open(t, t.TempDir())
	s := New(st, ps, &cfg, nil)
	ctx := context.Background()
	for _, owner := range []string{"alice", "bob"} {
		if _, _, err := auth.Issue(ctx, st, owner, "test"); err != nil {
			t.Fatal(err)
		}
	}
	hi := json.RawMessage(`"hi"`)
	first := uuid.NewString()
	res, err := s.PostAppMessage(ctx, "alice", "app-1", first, hi, NewChat{Title: "t"})
	if err != nil || res.Message == nil || res.Message.ChatID != first {
		t.Fatalf("first message: %+v, %v", res, err)
	}
	if id, err := s.AppChatID(ctx, "alice", "app-1"); err != nil || id != first {
		t.Fatalf("AppChatID = %q, %v; want %s", id, err, first)
	}
	other := uuid.NewString()
	if _, err := s.PostAppMessage(ctx, "alice", "app-1", other, hi, NewChat{}); !errors.Is(err, ErrAppChatMoved) {
		t.Fatalf("a message for another chat than the bound one: %v, want ErrAppChatMoved", err)
	}
	if _, err := st.GetChat(ctx, other); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused message made chat %s: %v", other, err)
	}
	if n, _ := st.CountChats(ctx, "alice"); n != 1 {
		t.Fatalf("alice has %d chats, want 1", n)
	}
	if _, err := s.PostAppMessage(ctx, "bob", first, uuid.NewString(), hi, NewChat{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob with alice's chat id: %v, want ErrNotFound", err)
	}
	if n, _ := st.CountChats(ctx, "bob"); n != 0 {
		t.Fatalf("bob has %d chats, want 0", n)
	}
}
