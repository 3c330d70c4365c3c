package api

import (
	"net/http"
	"strings"

	"github.com/parleyhq/parley/internal/auth"
)

// ownerHandler is a handler of an authenticated route; owner is the token's.
type ownerHandler func(w http.ResponseWriter, r *http.Request, owner string) error

// authed checks the request's bearer token before h runs; a missing,
// malformed, unknown or revoked token is a 401.
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
		return h(w, r, owner)
	}
}
