package auth

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/parleyhq/parley/internal/store"
)

// AdminOwner is the owner created on first start.
const AdminOwner = "admin"

var ownerRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// ErrUnauthorized is a missing, malformed, unknown or revoked token.
var ErrUnauthorized = errors.New("missing, invalid or revoked token")

// ValidOwner reports whether name can be an owner: 1-63 lower-case letters,
// digits, "_", "." or "-", starting with a letter or digit.
func ValidOwner(name string) error {
	if !ownerRE.MatchString(name) {
		return fmt.Errorf("owner %q must match %s", name, ownerRE)
	}
	return nil
}

// Issue creates a token for owner, creating the owner if needed, and returns
// the plaintext (to be shown once) with the stored record.
func Issue(ctx context.Context, st store.Store, owner, name string) (string, store.Token, error) {
	if err := ValidOwner(owner); err != nil {
		return "", store.Token{}, err
	}
	plain, id, hash := New()
	tok := store.Token{ID: id, Owner: owner, Name: name, Hash: hash}
	err := st.InTx(ctx, func(tx store.Tx) error {
		if _, err := tx.CreateOwner(ctx, owner); err != nil {
			return err
		}
		return tx.InsertToken(ctx, &tok)
	})
	if err != nil {
		return "", store.Token{}, fmt.Errorf("issue token for %s: %w", owner, err)
	}
	return plain, tok, nil
}

// Bootstrap creates the admin owner and its first token when the database
// has no owner at all. created is false (and plaintext empty) otherwise; of
// several replicas starting at once on an empty database, one creates it.
func Bootstrap(ctx context.Context, st store.Store) (plaintext string, created bool, err error) {
	plain, id, hash := New()
	err = st.InTx(ctx, func(tx store.Tx) error {
		n, err := tx.CountOwners(ctx)
		if err != nil || n > 0 {
			return err
		}
		if created, err = tx.CreateOwner(ctx, AdminOwner); err != nil || !created {
			return err
		}
		return tx.InsertToken(ctx, &store.Token{ID: id, Owner: AdminOwner, Name: "bootstrap", Hash: hash})
	})
	if err != nil {
		return "", false, fmt.Errorf("bootstrap admin: %w", err)
	}
	if !created {
		return "", false, nil
	}
	return plain, true, nil
}

// Authenticate returns the owner of a plaintext bearer token, or
// ErrUnauthorized. The secret is compared in constant time.
func Authenticate(ctx context.Context, r store.Reader, bearer string) (string, error) {
	id, secret, err := Parse(bearer)
	if err != nil {
		return "", ErrUnauthorized
	}
	tok, err := r.GetToken(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", ErrUnauthorized
	}
	if err != nil {
		return "", fmt.Errorf("authenticate: %w", err)
	}
	if !Matches(secret, tok.Hash) || tok.RevokedAt != nil {
		return "", ErrUnauthorized
	}
	return tok.Owner, nil
}
