package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// MaxTokenName bounds a token's label, in characters.
const MaxTokenName = 200

// UnknownTokenError is a token id that names no token.
type UnknownTokenError struct{ ID string }

func (e *UnknownTokenError) Error() string { return fmt.Sprintf("token %q not found", e.ID) }

// Tokens lists every token (owner "") or one owner's, oldest first; only
// the admin may list them. Secrets are never returned: only hashes are kept.
func (s *Service) Tokens(ctx context.Context, caller, owner string) ([]store.Token, error) {
	if caller != auth.AdminOwner {
		return nil, &ForbiddenError{Caller: caller, Action: "list tokens"}
	}
	toks, err := s.st.ListTokens(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return toks, nil
}

// Token returns a token by id, revoked or not, without its secret; an
// *UnknownTokenError if there is none. The HTTP layer reads through it
// whether a stream's token was revoked, and a deciding token's name.
func (s *Service) Token(ctx context.Context, id string) (store.Token, error) {
	tok, err := s.st.GetToken(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Token{}, &UnknownTokenError{ID: id}
	}
	if err != nil {
		return store.Token{}, fmt.Errorf("get token %s: %w", id, err)
	}
	return tok, nil
}

// IssueToken creates a token for owner (creating the owner if needed) and
// returns its plaintext, shown only this once, with its record; only the
// admin may issue tokens. A bad owner or name is a *chat.ValidationError
// and nothing is written.
func (s *Service) IssueToken(ctx context.Context, caller, owner, name string) (string, store.Token, error) {
	if caller != auth.AdminOwner {
		return "", store.Token{}, &ForbiddenError{Caller: caller, Action: "create tokens"}
	}
	if err := auth.ValidOwner(owner); err != nil {
		return "", store.Token{}, &chat.ValidationError{Field: "owner", Message: err.Error()}
	}
	name = strings.TrimSpace(name)
	if utf8.RuneCountInString(name) > MaxTokenName {
		return "", store.Token{}, &chat.ValidationError{Field: "name", Message: fmt.Sprintf("at most %d characters", MaxTokenName)}
	}
	return auth.Issue(ctx, s.st, owner, name)
}

// RevokeToken revokes the token id and returns it as it is now; revoking a
// revoked token changes nothing. Only the admin may revoke tokens; an
// unknown id is an *UnknownTokenError.
func (s *Service) RevokeToken(ctx context.Context, caller, id string) (store.Token, error) {
	if caller != auth.AdminOwner {
		return store.Token{}, &ForbiddenError{Caller: caller, Action: "revoke tokens"}
	}
	var tok store.Token
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		t, err := tx.GetToken(ctx, id)
		if err != nil || t.RevokedAt != nil {
			tok = t
			return err
		}
		if err := tx.RevokeToken(ctx, id); err != nil {
			return err
		}
		tok, err = tx.GetToken(ctx, id)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Token{}, &UnknownTokenError{ID: id}
	case err != nil:
		return store.Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return tok, nil
}
