package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/sqlite"
)

// BenchmarkRunWrites is the writer's share of one one-step run, on one
// goroutine: acquire the chat, then the fenced final write (the answer with
// its usage, and the move to waiting). The engine's loop on SQLite is bound
// by this; cmd/parley-bench measures the whole loop.
func BenchmarkRunWrites(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "parley.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.InTx(ctx, func(tx store.Tx) error { _, err := tx.CreateOwner(ctx, "o"); return err }); err != nil {
		b.Fatal(err)
	}
	for done := 0; done < b.N; done += 200 {
		err := s.InTx(ctx, func(tx store.Tx) error {
			for i := done; i < min(done+200, b.N); i++ {
				c := chat.Chat{ID: fmt.Sprintf("c%09d", i), Owner: "o", Model: "m", Status: chat.Pending}
				if err := tx.InsertChat(ctx, &c); err != nil {
					return err
				}
				m := chat.Message{ChatID: c.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("hello")}}
				if err := tx.InsertMessage(ctx, &m); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetParallelism(32) // 64 goroutines on 2 cores, as the engine's default concurrency
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var ids []int64
		for pb.Next() {
			if err := oneRun(ctx, s, &ids); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// oneRun acquires a chat and ends its run, as the engine's writes do.
func oneRun(ctx context.Context, s *sqlite.Store, ids *[]int64) error {
	cs, ls, err := s.AcquireChats(ctx, store.Acquire{WorkerID: "w", TTL: time.Minute, Max: 1})
	if err != nil || len(cs) != 1 {
		return fmt.Errorf("acquire: %d chats, %v", len(cs), err)
	}
	if len(*ids) == 0 {
		if *ids, err = s.ReserveMessageIDs(ctx, 64); err != nil {
			return err
		}
	}
	id := (*ids)[0]
	*ids = (*ids)[1:]
	return s.InTx(ctx, func(tx store.Tx) error {
		if err := tx.Fence(ctx, ls[0]); err != nil {
			return err
		}
		m := chat.Message{ID: id, ChatID: cs[0].ID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("hi")},
			Usage: &chat.Usage{InputTokens: 10, OutputTokens: 5}}
		if err := tx.InsertMessage(ctx, &m); err != nil {
			return err
		}
		_, err := tx.TransitionChat(ctx, cs[0].ID, store.Transition{From: chat.Running, To: chat.Waiting})
		return err
	})
}
