package storetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var appChatTests = map[string]func(*testing.T, opener){
	"BindAndRead":              testAppChatBindAndRead,
	"RebindRefusedTxGoesOn":    testAppChatRebind,
	"UnknownChat":              testAppChatUnknownChat,
	"DeleteChatFreesTheID":     testAppChatDeleteFrees,
	"ConcurrentBindsOneWins":   testAppChatConcurrent,
	"PerOwner":                 testAppChatPerOwner,
	"ReadInsideTheTransaction": testAppChatInTx,
}

func testAppChatBindAndRead(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	_, err := s.AppChat(t.Context(), "alice", "app-1")
	wantErr(t, "AppChat before binding", err, store.ErrNotFound)
	inTx(t, s, func(tx store.Tx) error { return tx.BindAppChat(t.Context(), "alice", "app-1", c.ID) })
	got, err := s.AppChat(t.Context(), "alice", "app-1")
	if err != nil || got != c.ID {
		t.Fatalf("AppChat = %q, %v; want %s", got, err, c.ID)
	}
}

// A second binding of a bound id is refused with ErrExists and leaves the
// transaction usable: a PostgreSQL error would abort it.
func testAppChatRebind(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	a, b := addChat(t, s, chat.Chat{}), addChat(t, s, chat.Chat{})
	inTx(t, s, func(tx store.Tx) error { return tx.BindAppChat(t.Context(), "alice", "app-1", a.ID) })
	inTx(t, s, func(tx store.Tx) error {
		wantErr(t, "second BindAppChat", tx.BindAppChat(t.Context(), "alice", "app-1", b.ID), store.ErrExists)
		got, err := tx.AppChat(t.Context(), "alice", "app-1")
		if err != nil || got != a.ID {
			t.Errorf("AppChat in the transaction = %q, %v; want %s", got, err, a.ID)
		}
		return tx.BindAppChat(t.Context(), "alice", "app-2", b.ID)
	})
	if got, _ := s.AppChat(t.Context(), "alice", "app-1"); got != a.ID {
		t.Fatalf("app-1 = %q, want %s", got, a.ID)
	}
	if got, _ := s.AppChat(t.Context(), "alice", "app-2"); got != b.ID {
		t.Fatalf("app-2 = %q, want %s", got, b.ID)
	}
}

func testAppChatUnknownChat(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	inTx(t, s, func(tx store.Tx) error {
		wantErr(t, "BindAppChat to an unknown chat", tx.BindAppChat(t.Context(), "alice", "app-1", "nope"), store.ErrNotFound)
		return tx.BindAppChat(t.Context(), "alice", "app-2", c.ID) // the transaction goes on
	})
	_, err := s.AppChat(t.Context(), "alice", "app-1")
	wantErr(t, "AppChat of the refused binding", err, store.ErrNotFound)
}

func testAppChatDeleteFrees(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	a, b := addChat(t, s, chat.Chat{}), addChat(t, s, chat.Chat{})
	inTx(t, s, func(tx store.Tx) error { return tx.BindAppChat(t.Context(), "alice", "app-1", a.ID) })
	inTx(t, s, func(tx store.Tx) error { return tx.DeleteChat(t.Context(), a.ID) })
	_, err := s.AppChat(t.Context(), "alice", "app-1")
	wantErr(t, "AppChat of a deleted chat", err, store.ErrNotFound)
	inTx(t, s, func(tx store.Tx) error { return tx.BindAppChat(t.Context(), "alice", "app-1", b.ID) })
	if got, _ := s.AppChat(t.Context(), "alice", "app-1"); got != b.ID {
		t.Fatalf("app-1 = %q, want %s", got, b.ID)
	}
}

// Ten transactions released together each create a chat and bind the
// same app id to it: exactly one binding commits.
func testAppChatConcurrent(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	const n = 10
	start := make(chan struct{})
	errs := make([]error, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = s.InTx(t.Context(), func(tx store.Tx) error {
				c := chat.Chat{Owner: "alice", Model: "m", Status: chat.Waiting}
				c.ID = uuid.NewString()
				if err := tx.InsertChat(t.Context(), &c); err != nil {
					return err
				}
				ids[i] = c.ID
				return tx.BindAppChat(t.Context(), "alice", "app-1", c.ID)
			})
		}()
	}
	close(start)
	wg.Wait()
	won := ""
	for i, err := range errs {
		switch {
		case err == nil && won == "":
			won = ids[i]
		case err == nil:
			t.Fatalf("two bindings committed: %s and %s", won, ids[i])
		case !errors.Is(err, store.ErrExists):
			t.Fatalf("binding %d: %v, want ErrExists", i, err)
		}
	}
	if got, err := s.AppChat(t.Context(), "alice", "app-1"); err != nil || got != won || won == "" {
		t.Fatalf("AppChat = %q, %v; the binding that committed is %q", got, err, won)
	}
}

func testAppChatPerOwner(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	a, b := addChat(t, s, chat.Chat{}), addChat(t, s, chat.Chat{Owner: "bob"})
	inTx(t, s, func(tx store.Tx) error {
		if err := tx.BindAppChat(t.Context(), "alice", "app-1", a.ID); err != nil {
			return err
		}
		return tx.BindAppChat(t.Context(), "bob", "app-1", b.ID)
	})
	if got, _ := s.AppChat(t.Context(), "bob", "app-1"); got != b.ID {
		t.Fatalf("bob's app-1 = %q, want %s", got, b.ID)
	}
}

// A binding made in a transaction is read in it, and not outside before
// the commit.
func testAppChatInTx(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	err := txErr(t, s, func(tx store.Tx) error {
		if err := tx.BindAppChat(t.Context(), "alice", "app-1", c.ID); err != nil {
			return err
		}
		if got, err := tx.AppChat(t.Context(), "alice", "app-1"); err != nil || got != c.ID {
			t.Errorf("AppChat in the transaction = %q, %v", got, err)
		}
		return errBoom
	})
	wantErr(t, "rolled back transaction", err, errBoom)
	_, err = s.AppChat(t.Context(), "alice", "app-1")
	wantErr(t, "AppChat after the rollback", err, store.ErrNotFound)
}
