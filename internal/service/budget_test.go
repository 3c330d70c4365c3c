package service

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
)

// onBothStores runs test on a fresh SQLite store and a fresh PostgreSQL one
// (skipped without PARLEY_TEST_POSTGRES), with the owner alice.
func onBothStores(t *testing.T, test func(t *testing.T, st store.Store)) {
	run := func(t *testing.T, st store.Store) {
		if _, _, err := auth.Issue(context.Background(), st, "alice", "test"); err != nil {
			t.Fatal(err)
		}
		test(t, st)
	}
	t.Run("SQLite", func(t *testing.T) { run(t, sqlitetest.Open(t, t.TempDir())) })
	t.Run("PostgreSQL", func(t *testing.T) { run(t, pgtest.Store(t, pgtest.Migrated(t))) })
}

// budgetService is a Service over st whose budget is b.
func budgetService(t *testing.T, st store.Store, b *quota.Budget) *Service {
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "echo", Provider: "echo", Model: "echo"}}
	cfg.DefaultModel = "echo"
	ps := memory.New()
	t.Cleanup(func() { ps.Close() })
	return New(st, ps, &cfg, nil, WithBudget(b))
}

// chatState is what a refused request must leave as it was.
type chatState struct {
	Chat   chat.Chat
	Msgs   []chat.Message
	Queued []chat.QueuedMessage
	Chats  int
}

func stateOf(t *testing.T, st store.Store, id string) chatState {
	t.Helper()
	ctx := context.Background()
	c, err := st.GetChat(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := st.ListMessages(ctx, id, 0, store.MaxPageSize)
	if err != nil {
		t.Fatal(err)
	}
	q, err := st.ListQueued(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.CountChats(ctx, c.Owner)
	if err != nil {
		t.Fatal(err)
	}
	return chatState{Chat: c, Msgs: msgs, Queued: q, Chats: n}
}

// spend records usage of tokens for the chat, as a step's write does.
func spend(t *testing.T, st store.Store, id string, tokens int64) {
	t.Helper()
	ctx := context.Background()
	if err := st.InTx(ctx, func(tx store.Tx) error {
		return tx.AddUsage(ctx, id, chat.Usage{InputTokens: tokens / 2, OutputTokens: tokens - tokens/2})
	}); err != nil {
		t.Fatal(err)
	}
}

func setQuotas(t *testing.T, st store.Store, owner string, o quota.Overrides) {
	t.Helper()
	ctx := context.Background()
	if err := st.InTx(ctx, func(tx store.Tx) error { return tx.SetOwnerQuotas(ctx, owner, o) }); err != nil {
		t.Fatal(err)
	}
}

// TestBudgetRefusesNewWork: once the owner's day budget is reached, a
// message (to an idle chat, or queued to a busy one) and a chat created
// with a message are refused with the budget's figures, and write nothing;
// a chat without a message is still created. The next UTC day, or an
// override, lifts the refusal.
func TestBudgetRefusesNewWork(t *testing.T) {
	onBothStores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		b := &quota.Budget{Defaults: quota.Limits{TokensPerDay: 100}, Now: func() time.Time { return now }}
		s := budgetService(t, st, b)
		msg := json.RawMessage(`"hello"`)
		idle, err := s.CreateChat(ctx, "alice", NewChat{})
		if err != nil {
			t.Fatal(err)
		}
		busy, err := s.CreateChat(ctx, "alice", NewChat{Message: msg}) // pending
		if err != nil {
			t.Fatal(err)
		}
		spend(t, st, busy.ID, 99)
		if _, err := s.PostMessage(ctx, "alice", idle.ID, msg, ""); err != nil {
			t.Fatalf("a message under the budget: %v", err)
		}
		spend(t, st, busy.ID, 1) // 100 of 100

		wantExceeded := func(err error) {
			t.Helper()
			var e *quota.ExceededError
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want a *quota.ExceededError", err)
			}
			want := quota.ExceededError{Owner: "alice", Unit: "tokens", Limit: 100, Spent: 100, Period: quota.Day, ResetsAt: quota.Day.End(now)}
			if *e != want {
				t.Errorf("refusal %+v, want %+v", *e, want)
			}
		}
		for _, c := range []struct {
			id   string
			busy chat.BusyMode
		}{{idle.ID, ""}, {busy.ID, chat.BusyQueue}, {busy.ID, chat.BusyInterrupt}} {
			before := stateOf(t, st, c.id)
			_, err := s.PostMessage(ctx, "alice", c.id, msg, c.busy)
			wantExceeded(err)
			if after := stateOf(t, st, c.id); !reflect.DeepEqual(after, before) {
				t.Errorf("a refused message (busy %q) changed the chat:\nbefore %+v\nafter  %+v", c.busy, before, after)
			}
		}
		before := stateOf(t, st, idle.ID)
		_, err = s.CreateChat(ctx, "alice", NewChat{Message: msg})
		wantExceeded(err)
		if after := stateOf(t, st, idle.ID); after.Chats != before.Chats {
			t.Errorf("a refused creation left %d chats, want %d", after.Chats, before.Chats)
		}
		if _, err := s.CreateChat(ctx, "alice", NewChat{}); err != nil {
			t.Errorf("a chat without a message is no new work: %v", err)
		}

		// The next UTC day the budget starts over.
		now = quota.Day.End(now)
		if _, err := s.PostMessage(ctx, "alice", idle.ID, msg, ""); err != nil {
			t.Fatalf("a message the next day: %v", err)
		}
		now = time.Now().UTC()
		_, err = s.PostMessage(ctx, "alice", busy.ID, msg, "")
		wantExceeded(err)

		raised := int64(1000)
		setQuotas(t, st, "alice", quota.Overrides{TokensPerDay: &raised})
		if _, err := s.PostMessage(ctx, "alice", busy.ID, msg, ""); err != nil {
			t.Fatalf("a message after an override raised the budget: %v", err)
		}
		if _, err := s.CreateChat(ctx, "alice", NewChat{Message: msg}); err != nil {
			t.Fatalf("a chat after an override raised the budget: %v", err)
		}
	})
}

// TestMonthBudgetRollsOver: a month budget refuses until the next UTC
// month; the next day of the same month does not lift it.
func TestMonthBudgetRollsOver(t *testing.T) {
	onBothStores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		now := time.Now().UTC()
		b := &quota.Budget{Defaults: quota.Limits{SpendMicrosPerMonth: 500}, Now: func() time.Time { return now }}
		s := budgetService(t, st, b)
		c, err := s.CreateChat(ctx, "alice", NewChat{})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.InTx(ctx, func(tx store.Tx) error {
			return tx.AddUsage(ctx, c.ID, chat.Usage{InputTokens: 1, CostMicros: 500})
		}); err != nil {
			t.Fatal(err)
		}
		msg := json.RawMessage(`"hello"`)
		_, err = s.PostMessage(ctx, "alice", c.ID, msg, "")
		var e *quota.ExceededError
		if !errors.As(err, &e) || e.Unit != "micros" || e.Period != quota.Month || !e.ResetsAt.Equal(quota.Month.End(now)) {
			t.Fatalf("err = %v, want the month spend limit, resetting at %s", err, quota.Month.End(now))
		}
		if next := quota.Day.End(now); next.Month() == now.Month() {
			now = next
			if _, err := s.PostMessage(ctx, "alice", c.ID, msg, ""); !errors.As(err, &e) {
				t.Fatalf("the next day of the same month: err = %v, want the month limit", err)
			}
		}
		now = quota.Month.End(now)
		if _, err := s.PostMessage(ctx, "alice", c.ID, msg, ""); err != nil {
			t.Fatalf("a message the next month: %v", err)
		}
	})
}

// TestMaxChats: an owner with max_chats chats can neither create nor fork
// another, and nothing is written; an override raises the cap.
func TestMaxChats(t *testing.T) {
	onBothStores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := budgetService(t, st, &quota.Budget{Defaults: quota.Limits{MaxChats: 2}})
		first, err := s.CreateChat(ctx, "alice", NewChat{Message: json.RawMessage(`"hello"`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateChat(ctx, "alice", NewChat{}); err != nil {
			t.Fatal(err)
		}
		msgs, err := st.ListMessages(ctx, first.ID, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		wantCap := func(err error) {
			t.Helper()
			var e *quota.CapError
			if !errors.As(err, &e) || e.Key != "max_chats" || e.Limit != 2 {
				t.Fatalf("err = %v, want the max_chats cap of 2", err)
			}
			if n, err := st.CountChats(ctx, "alice"); err != nil || n != 2 {
				t.Fatalf("the owner has %d chats (%v), want 2", n, err)
			}
		}
		_, err = s.CreateChat(ctx, "alice", NewChat{})
		wantCap(err)
		_, err = s.Fork(ctx, "alice", first.ID, msgs[0].ID)
		wantCap(err)
		_, _, err = s.CreateWithHistory(ctx, "alice", NewChat{}, []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("hi")}}})
		wantCap(err)

		three := 3
		setQuotas(t, st, "alice", quota.Overrides{MaxChats: &three})
		if _, err := s.Fork(ctx, "alice", first.ID, msgs[0].ID); err != nil {
			t.Fatalf("a fork after an override raised the cap: %v", err)
		}
	})
}
