package postgres_test

import (
	"errors"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// TestReservedInsertTravelsWithTheNextStatement: an insert with a reserved
// id is sent with the transaction's next statement, which reports the
// insert's failure (a missing chat: ErrNotFound) instead of its own result;
// nothing of the transaction is kept.
func TestReservedInsertTravelsWithTheNextStatement(t *testing.T) {
	s := openMigrated(t)
	ids, err := s.ReserveMessageIDs(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var next error
	err = s.InTx(t.Context(), func(tx store.Tx) error {
		if _, err := tx.CreateOwner(t.Context(), "alice"); err != nil {
			return err
		}
		m := chat.Message{ID: ids[0], ChatID: "missing", Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("x")}}
		if err := tx.InsertMessage(t.Context(), &m); err != nil {
			t.Errorf("InsertMessage with a reserved id answered at once (%v); it should travel with the next statement", err)
			return err
		}
		_, next = tx.CountOwners(t.Context())
		return next
	})
	if !errors.Is(next, store.ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("next statement: %v; transaction: %v; want both ErrNotFound from the insert", next, err)
	}
	if n, err := s.CountOwners(t.Context()); err != nil || n != 0 {
		t.Fatalf("owners after the failed transaction: %d, %v; want 0", n, err)
	}
}
