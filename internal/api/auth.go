package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/service"
)

// DefaultTokenCheck is how often an open stream re-reads its token when Deps
// sets no interval: a revoked token's streams end within about this long,
// on every replica, each stream costing one read by primary key per check.
const DefaultTokenCheck = 2 * time.Second

// kindUnauthorized is the event that ends a stream whose token stopped
// authenticating; its data is {"kind": "unauthorized", "message": "..."}.
const kindUnauthorized = "unauthorized"

// revokedData is the payload of the event that ends a revoked token's stream.
var revokedData = []byte(`{"kind":"` + kindUnauthorized + `","message":"the token was revoked; this stream ends"}`)

// ownerHandler is a handler of an authenticated route; owner is the token's.
type ownerHandler func(w http.ResponseWriter, r *http.Request, owner string) error

// tokenIDKey is the request context key of the authenticated token's id.
type tokenIDKey struct{}

// authed checks the request's bearer token before h runs; a missing,
// malformed, unknown or revoked token is a 401. Each request counts against
// the token's rate limit (this replica's, see quota.Rates): over it is a
// 429. The token's id goes into the request's context, for streams to
// check it again while they last.
func (a *api) authed(h ownerHandler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		header := r.Header.Get("Authorization")
		if header == "" {
			return &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
				Message: `missing token: send "Authorization: Bearer <token>"`}
		}
		scheme, token, ok := strings.Cut(header, " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			return &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
				Message: `malformed Authorization header: want "Bearer <token>"`}
		}
		owner, err := auth.Authenticate(r.Context(), a.st, token)
		if err != nil {
			return err
		}
		id, _, err := auth.Parse(token)
		if err != nil {
			return err // not after Authenticate accepted it
		}
		if err := a.gate.Admit(r.Context(), owner, id); err != nil {
			return err
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), tokenIDKey{}, id)), owner)
	}
}

// tokenRevocation returns a channel closed once the token that
// authenticated ctx's request is revoked, checked every a.tokenCheck (one
// check per token, shared by its streams: revocations) until ctx ends. The
// checks run beside the stream, so a slow database read never holds the
// stream's events back.
func (a *api) tokenRevocation(ctx context.Context) <-chan struct{} {
	id, _ := ctx.Value(tokenIDKey{}).(string)
	if id == "" {
		return nil // not authenticated by a token: nothing to revoke
	}
	return a.revocations.watch(ctx, id)
}

// tokenRevoked reports whether token id has been revoked or deleted, as
// the database says: the one place every replica sees a revocation. A
// failed read counts as not revoked (and is logged): a database passing
// through a failover should not cut every stream, and the next check
// decides.
func (a *api) tokenRevoked(ctx context.Context, id string) bool {
	tok, err := a.svc.Token(ctx, id)
	var unknown *service.UnknownTokenError
	switch {
	case errors.As(err, &unknown):
		return true
	case err != nil:
		if ctx.Err() == nil {
			a.log.Warn("stream: token not checked", "token", id, "err", err)
		}
		return false
	}
	return tok.RevokedAt != nil
}
