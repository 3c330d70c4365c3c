package service

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
)

func TestCreateWithHistory(t *testing.T) {
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

	user := chat.Message{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("weather?")}}
	call := chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{
		{Type: chat.PartToolCall, ToolCallID: "c1", ToolName: "get_weather", Args: json.RawMessage(`{}`)}}}
	result := chat.Message{Role: chat.RoleTool, Parts: []chat.Part{
		{Type: chat.PartToolResult, ToolCallID: "c1", ToolName: "get_weather", Output: json.RawMessage(`"sun"`)}}}

	for name, bad := range map[string][]chat.Message{
		"open call":          {user, call},
		"result of no call":  {user, result},
		"call answered late": {user, call, user, result},
		"unknown role":       {{Role: "system", Parts: []chat.Part{chat.TextPart("x")}}},
		"call in user":       {{Role: chat.RoleUser, Parts: call.Parts}},
	} {
		_, _, err := s.CreateWithHistory(ctx, "alice", NewChat{}, bad)
		var ve *chat.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: %v, want a validation error", name, err)
		}
	}

	created, msgs, err := s.CreateWithHistory(ctx, "alice", NewChat{Title: "t"}, []chat.Message{user, call, result})
	if err != nil {
		t.Fatal(err)
	}
	if created.Chat.Status != chat.Waiting || len(msgs) != 3 || msgs[2].ID <= msgs[0].ID || msgs[2].ChatID != created.Chat.ID {
		t.Fatalf("created %+v with %+v", created.Chat, msgs)
	}
	c, err := s.StartChat(ctx, "alice", created.Chat.ID)
	if err != nil || c.Status != chat.Pending {
		t.Fatalf("started: %+v, %v", c, err)
	}
	var se *StatusError
	if _, err := s.StartChat(ctx, "alice", created.Chat.ID); !errors.As(err, &se) {
		t.Fatalf("started twice: %v", err)
	}

	// A history that ends with the model's answer has nothing to answer.
	answer := chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("sun")}}
	done, _, err := s.CreateWithHistory(ctx, "alice", NewChat{Title: "t"}, []chat.Message{user, answer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartChat(ctx, "alice", done.Chat.ID); !errors.As(err, &se) {
		t.Fatalf("started after an answer: %v", err)
	}
	if _, err := s.StartChat(ctx, "bob", done.Chat.ID); err == nil {
		t.Fatal("bob started alice's chat")
	}

	// A result in a given history is capped as every result is, whatever
	// the client said of it.
	cfg.Tools.MaxResultBytes = 10
	long := result
	long.Parts = []chat.Part{{Type: chat.PartToolResult, ToolCallID: "c1", ToolName: "get_weather",
		Output: json.RawMessage(`"sunny all day, then rain"`), Truncated: true, OutputBytes: 3}}
	_, msgs, err = s.CreateWithHistory(ctx, "alice", NewChat{Title: "t"}, []chat.Message{user, call, long})
	if err != nil {
		t.Fatal(err)
	}
	if p := msgs[2].Parts[0]; !p.Truncated || p.OutputBytes != int64(len("sunny all day, then rain")) {
		t.Fatalf("stored result %s (truncated %v, %d bytes), want it capped at 10 bytes", p.Output, p.Truncated, p.OutputBytes)
	}
}
