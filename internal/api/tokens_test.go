package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/store"
)

// tokenAnswer is the body of POST /api/v1/tokens.
type tokenAnswer struct {
	store.Token
	Secret string `json:"token"`
}

// TestTokensRoutes: the admin lists, creates and revokes tokens over the
// API; a created token works at once and a revoked one no more; another
// owner is refused every route; bad input is a 400 that writes nothing.
func TestTokensRoutes(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s := newOn(t, backend)
		admin, alice := s.token(auth.AdminOwner), s.token("alice")

		list := func(query string) []store.Token {
			t.Helper()
			var l struct {
				Tokens []store.Token `json:"tokens"`
			}
			s.do("GET", "/api/v1/tokens"+query, admin, nil).expect(t, http.StatusOK, &l)
			return l.Tokens
		}
		before := list("")
		if len(before) != 2 {
			t.Fatalf("listed %d tokens, want the admin's and alice's: %+v", len(before), before)
		}

		var made tokenAnswer
		s.do("POST", "/api/v1/tokens", admin, `{"owner": "bob", "name": "laptop"}`).expect(t, http.StatusCreated, &made)
		if made.Owner != "bob" || made.Name != "laptop" || made.ID == "" || made.CreatedAt.IsZero() || made.RevokedAt != nil {
			t.Fatalf("created %+v", made)
		}
		if id, _, err := auth.Parse(made.Secret); err != nil || id != made.ID {
			t.Fatalf("the answer's token %q is not the token %s: %v", made.Secret, made.ID, err)
		}
		s.do("GET", "/api/v1/models", made.Secret, nil).expect(t, http.StatusOK, nil)
		bobs := list("?owner=bob")
		if len(bobs) != 1 || bobs[0].ID != made.ID || bobs[0].Name != "laptop" {
			t.Fatalf("bob's tokens %+v, want only %s", bobs, made.ID)
		}
		if body := string(s.do("GET", "/api/v1/tokens", admin, nil).body); strings.Contains(body, made.Secret) || strings.Contains(body, "hash") {
			t.Fatalf("the list shows a secret: %s", body)
		}

		// Nobody but the admin.
		for _, tok := range []string{alice, made.Secret} {
			s.do("GET", "/api/v1/tokens", tok, nil).expectError(t, http.StatusForbidden, "forbidden")
			s.do("POST", "/api/v1/tokens", tok, `{"owner": "mallory"}`).expectError(t, http.StatusForbidden, "forbidden")
			s.do("DELETE", "/api/v1/tokens/"+made.ID, tok, nil).expectError(t, http.StatusForbidden, "forbidden")
		}
		s.do("GET", "/api/v1/tokens", "", nil).expectError(t, http.StatusUnauthorized, "unauthorized")

		// Bad input names its field and writes nothing.
		for body, field := range map[string]string{
			`{"owner": "Not Valid"}`: "owner",
			`{}`:                     "owner",
			`{"owner": "carol", "name": "` + strings.Repeat("n", 201) + `"}`: "name",
			`{"owner": "carol", "secret": "x"}`:                              "secret",
		} {
			e := s.do("POST", "/api/v1/tokens", admin, body).expectError(t, http.StatusBadRequest, "invalid_field")
			if e.Error.Details["field"] != field {
				t.Errorf("%.60s: details %v, want field %q", body, e.Error.Details, field)
			}
		}
		if n := len(list("")); n != 3 {
			t.Fatalf("%d tokens after the refused requests, want 3", n)
		}

		var revoked store.Token
		s.do("DELETE", "/api/v1/tokens/"+made.ID, admin, nil).expect(t, http.StatusOK, &revoked)
		if revoked.ID != made.ID || revoked.RevokedAt == nil {
			t.Fatalf("revoke answered %+v", revoked)
		}
		s.do("GET", "/api/v1/models", made.Secret, nil).expectError(t, http.StatusUnauthorized, "unauthorized")
		var again store.Token
		s.do("DELETE", "/api/v1/tokens/"+made.ID, admin, nil).expect(t, http.StatusOK, &again)
		if again.RevokedAt == nil || !again.RevokedAt.Equal(*revoked.RevokedAt) {
			t.Fatalf("revoking again answered %+v, want the first revocation %v", again, revoked.RevokedAt)
		}
		e := s.do("DELETE", "/api/v1/tokens/nosuchtoken", admin, nil).expectError(t, http.StatusNotFound, "not_found")
		if e.Error.Details["id"] != "nosuchtoken" {
			t.Errorf("404 details %v, want the id", e.Error.Details)
		}
		if l := list("?owner=bob"); len(l) != 1 || l[0].RevokedAt == nil {
			t.Fatalf("bob's tokens after the revocation %+v", l)
		}
	})
}
