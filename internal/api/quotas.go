package api

import (
	"net/http"

	"github.com/parleyhq/parley/internal/quota"
)

// getQuotas serves GET /api/v1/owners/{owner}/quotas (the admin only):
// the defaults, the owner's overrides and its effective limits.
func (a *api) getQuotas(w http.ResponseWriter, r *http.Request, caller string) error {
	q, err := a.svc.OwnerQuotas(r.Context(), caller, r.PathValue("owner"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, q)
	return nil
}

// putQuotas serves PUT /api/v1/owners/{owner}/quotas (the admin only): the
// body's keys replace the owner's overrides (absent or null: the default;
// 0: unlimited). The new limits hold at once on this replica, and on the
// others once their cached limits expire (quota.DefaultCacheTTL).
func (a *api) putQuotas(w http.ResponseWriter, r *http.Request, caller string) error {
	var o quota.Overrides
	if err := a.decode(w, r, &o); err != nil {
		return err
	}
	owner := r.PathValue("owner")
	q, err := a.svc.SetOwnerQuotas(r.Context(), caller, owner, o)
	if err != nil {
		return err
	}
	a.gate.Invalidate(owner)
	writeJSON(w, http.StatusOK, q)
	return nil
}

// usage serves GET /api/v1/usage?period=day|month&owner=: what an owner
// used in the current UTC day (the default) or month, and its limits. An
// owner reads its own; the admin any owner's.
func (a *api) usage(w http.ResponseWriter, r *http.Request, caller string) error {
	q := r.URL.Query()
	p := quota.Period(q.Get("period"))
	switch p {
	case "":
		p = quota.Day
	case quota.Day, quota.Month:
	default:
		return badQuery("period", "want %q or %q, got %q", quota.Day, quota.Month, p)
	}
	owner := q.Get("owner")
	if owner == "" {
		owner = caller
	}
	u, err := a.svc.Usage(r.Context(), caller, owner, p, a.now())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}
