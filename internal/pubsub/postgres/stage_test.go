package postgres_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/postgres"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestStageSendsWithTheCommit: messages staged in a store transaction reach
// the other replica when the transaction commits, large payloads included,
// and never when it rolls back; this replica's subscribers get them from
// the returned deliver. A transaction that ran no statement still sends
// what it staged.
func TestStageSendsWithTheCommit(t *testing.T) {
	dsn := pgtest.DSN(t)
	st := pgtest.Store(t, dsn)
	channel := postgres.WithChannel(uniqueName())
	a := open(t, st.Pool(), channel)
	b := open(t, openPool(t, dsn), channel)
	far, near := subscribe(t, b, "t"), subscribe(t, a, "t")
	big := bytes.Repeat([]byte("large "), 4000) // stored by reference

	stage := func(fail error, payloads ...[]byte) error {
		t.Helper()
		var deliver func()
		err := st.InTx(t.Context(), func(tx store.Tx) error {
			ob, ok := tx.(pubsub.Outbox)
			if !ok {
				t.Fatalf("a PostgreSQL transaction (%T) is not a pubsub.Outbox", tx)
			}
			msgs := make([]pubsub.Message, len(payloads))
			for i, p := range payloads {
				msgs[i] = pubsub.Message{Topic: "t", Payload: p}
			}
			var err error
			if deliver, err = a.Stage(t.Context(), ob, msgs); err != nil {
				return err
			}
			return fail
		})
		if err == nil {
			deliver()
		}
		return err
	}
	errRollback := errors.New("roll back")
	if err := stage(errRollback, []byte("dropped"), big); !errors.Is(err, errRollback) {
		t.Fatalf("rolled-back transaction: %v", err)
	}
	if err := stage(nil, []byte("no statement")); err != nil {
		t.Fatal(err)
	}
	if err := stage(nil, []byte("kept"), big); err != nil {
		t.Fatal(err)
	}
	// Notifications arrive in commit order, so the first one proves the
	// rolled-back transaction sent nothing.
	for name, sub := range map[string]pubsub.Subscription{"other replica": far, "same replica": near} {
		for _, want := range [][]byte{[]byte("no statement"), []byte("kept"), big} {
			if m := receive(t, sub); !bytes.Equal(m.Payload, want) {
				t.Fatalf("%s got %d bytes %.20q, want %d bytes %.20q", name, len(m.Payload), m.Payload, len(want), want)
			}
		}
	}
}
