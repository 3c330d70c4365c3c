package storetest

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/store"
)

var ownerTests = map[string]func(*testing.T, opener){
	"CreateIdempotentAndCount": testCreateOwner,
	"LockOwner":                testLockOwner,
	"TokenRoundTrip":           testTokenRoundTrip,
	"TokenDuplicateID":         testTokenDuplicate,
	"TokenUnknownOwner":        testTokenUnknownOwner,
	"RevokeOnce":               testRevoke,
	"ListTokens":               testListTokens,
}

func testCreateOwner(t *testing.T, open opener) {
	s := open(t)
	count := func() int {
		n, err := s.CountOwners(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("CountOwners of an empty store = %d", n)
	}
	for _, tc := range []struct {
		name    string
		created bool
		count   int
	}{{"alice", true, 1}, {"alice", false, 1}, {"bob", true, 2}} {
		var created bool
		inTx(t, s, func(tx store.Tx) error {
			var err error
			created, err = tx.CreateOwner(t.Context(), tc.name)
			return err
		})
		if created != tc.created || count() != tc.count {
			t.Fatalf("CreateOwner(%s) = %v with %d owners, want %v with %d", tc.name, created, count(), tc.created, tc.count)
		}
	}
	if err := txErr(t, s, func(tx store.Tx) error { _, err := tx.CreateOwner(t.Context(), ""); return err }); err == nil {
		t.Fatal("CreateOwner with an empty name: no error")
	}
}

// addToken stores a token and returns it as InsertToken left it.
func addToken(t *testing.T, s store.Store, id, owner string) store.Token {
	t.Helper()
	tok := store.Token{ID: id, Owner: owner, Name: "token " + id, Hash: []byte{0, 1, 2, 0xff, byte(len(id))}}
	inTx(t, s, func(tx store.Tx) error { return tx.InsertToken(t.Context(), &tok) })
	return tok
}

func testTokenRoundTrip(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	before := now()
	tok := addToken(t, s, "tok1", "alice")
	if tok.CreatedAt.Before(before) || tok.CreatedAt.After(now()) || tok.CreatedAt.Location() != time.UTC || tok.RevokedAt != nil {
		t.Fatalf("InsertToken left %+v", tok)
	}
	got, err := s.GetToken(t.Context(), "tok1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "GetToken", got, tok)
	_, err = s.GetToken(t.Context(), "missing")
	wantErr(t, "GetToken missing", err, store.ErrNotFound)
}

func testTokenDuplicate(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	first := addToken(t, s, "tok1", "alice")
	inTx(t, s, func(tx store.Tx) error {
		dup := store.Token{ID: "tok1", Owner: "alice", Hash: []byte("other")}
		wantErr(t, "InsertToken duplicate", tx.InsertToken(t.Context(), &dup), store.ErrExists)
		// The transaction goes on.
		next := store.Token{ID: "tok2", Owner: "alice", Hash: []byte("h")}
		return tx.InsertToken(t.Context(), &next)
	})
	got, err := s.GetToken(t.Context(), "tok1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "first token", got, first)
	if _, err := s.GetToken(t.Context(), "tok2"); err != nil {
		t.Fatalf("token inserted after ErrExists: %v", err)
	}
}

func testTokenUnknownOwner(t *testing.T, open opener) {
	s := open(t)
	inTx(t, s, func(tx store.Tx) error {
		tok := store.Token{ID: "tok1", Owner: "nobody", Hash: []byte("h")}
		wantErr(t, "InsertToken unknown owner", tx.InsertToken(t.Context(), &tok), store.ErrNotFound)
		_, err := tx.CreateOwner(t.Context(), "alice") // the transaction goes on
		return err
	})
	_, err := s.GetToken(t.Context(), "tok1")
	wantErr(t, "GetToken", err, store.ErrNotFound)
}

func testRevoke(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	tok := addToken(t, s, "tok1", "alice")
	other := addToken(t, s, "tok2", "alice")
	before := now()
	inTx(t, s, func(tx store.Tx) error { return tx.RevokeToken(t.Context(), "tok1") })
	got, err := s.GetToken(t.Context(), "tok1")
	if err != nil {
		t.Fatal(err)
	}
	if got.RevokedAt == nil || got.RevokedAt.Before(before) || got.RevokedAt.After(now()) || got.RevokedAt.Location() != time.UTC {
		t.Fatalf("RevokedAt = %v after revoking", got.RevokedAt)
	}
	first := *got.RevokedAt
	clockPast(t, first)
	inTx(t, s, func(tx store.Tx) error { return tx.RevokeToken(t.Context(), "tok1") })
	again, err := s.GetToken(t.Context(), "tok1")
	if err != nil {
		t.Fatal(err)
	}
	if again.RevokedAt == nil || !again.RevokedAt.Equal(first) {
		t.Fatalf("second revoke moved RevokedAt from %v to %v", first, again.RevokedAt)
	}
	tok.RevokedAt = &first
	wantEqual(t, "revoked token", again, tok)
	if o, _ := s.GetToken(t.Context(), "tok2"); o.RevokedAt != nil {
		t.Fatalf("revoking tok1 revoked %s", other.ID)
	}
	err = txErr(t, s, func(tx store.Tx) error { return tx.RevokeToken(t.Context(), "missing") })
	wantErr(t, "RevokeToken missing", err, store.ErrNotFound)
}

func testListTokens(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	var all []store.Token
	for _, tc := range [][2]string{{"t3", "alice"}, {"t1", "bob"}, {"t2", "alice"}} {
		tok := addToken(t, s, tc[0], tc[1])
		// Distinct creation times, so "oldest first" is not the id order.
		clockPast(t, tok.CreatedAt)
		all = append(all, tok)
	}
	list := func(owner string) []store.Token {
		toks, err := s.ListTokens(t.Context(), owner)
		if err != nil {
			t.Fatal(err)
		}
		return toks
	}
	wantEqual(t, "all tokens", list(""), all)
	wantEqual(t, "alice's tokens", list("alice"), []store.Token{all[0], all[2]})
	wantEqual(t, "bob's tokens", list("bob"), []store.Token{all[1]})
	if got := list("carol"); got == nil || len(got) != 0 {
		t.Fatalf("tokens of an owner without any: %#v", got)
	}
}

// testLockOwner: an owner's lock is taken in a transaction; an unknown
// owner is ErrNotFound.
func testLockOwner(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	inTx(t, s, func(tx store.Tx) error { return tx.LockOwner(t.Context(), "alice") })
	err := txErr(t, s, func(tx store.Tx) error { return tx.LockOwner(t.Context(), "nobody") })
	wantErr(t, "LockOwner of an unknown owner", err, store.ErrNotFound)
}
