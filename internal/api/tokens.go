package api

import (
	"errors"
	"net/http"

	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// tokenList is the body of GET /api/v1/tokens.
type tokenList struct {
	Tokens []store.Token `json:"tokens"`
}

// issuedToken is the body of POST /api/v1/tokens: the record, and the
// token itself, which is shown only this once.
type issuedToken struct {
	store.Token
	Secret string `json:"token"`
}

// listTokens serves GET /api/v1/tokens[?owner=] (the admin only): every
// token, or one owner's, oldest first, without secrets.
func (a *api) listTokens(w http.ResponseWriter, r *http.Request, caller string) error {
	toks, err := a.svc.Tokens(r.Context(), caller, r.URL.Query().Get("owner"))
	if err != nil {
		return err
	}
	if toks == nil {
		toks = []store.Token{}
	}
	writeJSON(w, http.StatusOK, tokenList{Tokens: toks})
	return nil
}

// createToken serves POST /api/v1/tokens (the admin only), body
// {"owner": "alice", "name": "laptop"}: a new token for the owner, created
// if needed.
func (a *api) createToken(w http.ResponseWriter, r *http.Request, caller string) error {
	var body struct {
		Owner string `json:"owner"`
		Name  string `json:"name"`
	}
	if err := a.decode(w, r, &body); err != nil {
		return err
	}
	plain, tok, err := a.svc.IssueToken(r.Context(), caller, body.Owner, body.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, issuedToken{Token: tok, Secret: plain})
	return nil
}

// revokeToken serves DELETE /api/v1/tokens/{id} (the admin only): the
// token is revoked at once (its open streams end within the token check
// interval) and answered as it is now; revoking it again changes nothing.
func (a *api) revokeToken(w http.ResponseWriter, r *http.Request, caller string) error {
	id := r.PathValue("id")
	tok, err := a.svc.RevokeToken(r.Context(), caller, id)
	var unknown *service.UnknownTokenError
	if errors.As(err, &unknown) {
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: unknown.Error(),
			Details: map[string]any{"id": id}}
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tok)
	return nil
}
