package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// TestGroupTxSharesTransactions: fenced writes that arrive together share
// transactions (each chat's row was last written by a group's transaction,
// xmin), and every one of them commits.
func TestGroupTxSharesTransactions(t *testing.T) {
	s := openMigrated(t)
	ctx := t.Context()
	const n = 40
	err := s.InTx(ctx, func(tx store.Tx) error {
		if _, err := tx.CreateOwner(ctx, "alice"); err != nil {
			return err
		}
		for i := range n {
			c := chat.Chat{ID: fmt.Sprintf("c%02d", i), Owner: "alice", Model: "m", Status: chat.Pending}
			if err := tx.InsertChat(ctx, &c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, leases, err := s.AcquireChats(ctx, "w1", time.Hour, n)
	if err != nil || len(leases) != n {
		t.Fatalf("acquire: %d leases, %v", len(leases), err)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i, l := range leases {
		wg.Go(func() {
			<-start
			errs[i] = s.InGroupTx(ctx, func(tx store.Tx) error {
				if err := tx.Fence(ctx, l); err != nil {
					return err
				}
				_, err := tx.TransitionChat(ctx, l.ChatID, store.Transition{From: chat.Running, To: chat.Waiting})
				return err
			})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	var waiting, txs int
	err = s.Pool().QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM chats WHERE status = 'waiting'`).Scan(&waiting, &txs)
	if err != nil {
		t.Fatal(err)
	}
	if waiting != n || txs >= n {
		t.Fatalf("%d of %d chats waiting, written by %d transactions; want all, by fewer transactions than writes", waiting, n, txs)
	}
	t.Logf("%d writes in %d transactions", n, txs)
}
