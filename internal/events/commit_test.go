package events_test

import (
	"crypto/rand"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestCommitReportsALostLeaseWhateverTheEventSize: on PostgreSQL a fenced
// write's events travel in its transaction, and an event too large for a
// notification is stored by a statement of that transaction, the first to
// reach the database. A lost lease must still come back as ErrLeaseLost,
// with nothing written, whether the event is small or large.
func TestCommitReportsALostLeaseWhateverTheEventSize(t *testing.T) {
	for _, size := range []int{1, 20000} {
		t.Run(map[int]string{1: "small event", 20000: "large event"}[size], func(t *testing.T) {
			log := slog.New(slog.DiscardHandler)
			st, ps := pgtest.Replica(t, pgtest.Migrated(t), "events_test_"+strings.ToLower(rand.Text()[:10]), log)
			err := st.InTx(t.Context(), func(tx store.Tx) error {
				if _, err := tx.CreateOwner(t.Context(), "alice"); err != nil {
					return err
				}
				c := chat.Chat{ID: "c1", Owner: "alice", Model: "m", Status: chat.Pending}
				return tx.InsertChat(t.Context(), &c)
			})
			if err != nil {
				t.Fatal(err)
			}
			_, leases, err := st.AcquireChats(t.Context(), store.Acquire{WorkerID: "w1", TTL: time.Minute, Max: 1})
			if err != nil || len(leases) != 1 {
				t.Fatalf("acquire: %v, %v", leases, err)
			}
			stale := leases[0]
			stale.Generation-- // the lease of an earlier holder
			ids, err := st.ReserveMessageIDs(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			err = events.Commit(t.Context(), st.InTx, ps, log, func(tx store.Tx, n *events.Notice) error {
				if err := tx.Fence(t.Context(), stale); err != nil {
					return err
				}
				m := chat.Message{ID: ids[0], ChatID: "c1", Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart(strings.Repeat("y", size))}}
				if err := tx.InsertMessage(t.Context(), &m); err != nil {
					return err
				}
				n.Message(m)
				return nil
			})
			if !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("Commit = %v, want ErrLeaseLost", err)
			}
			if msgs, err := st.ListMessages(t.Context(), "c1", 0, 10); err != nil || len(msgs) != 0 {
				t.Fatalf("messages after the refused write: %d, %v", len(msgs), err)
			}
		})
	}
}
