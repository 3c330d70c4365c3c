package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
)

// ForbiddenError refuses an operation that only the admin may do.
type ForbiddenError struct {
	Caller string
	Action string // like "read another owner's usage"
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("only the %s owner may %s (this token is %s's)", auth.AdminOwner, e.Action, e.Caller)
}

// UnknownOwnerError is an owner that does not exist.
type UnknownOwnerError struct{ Owner string }

func (e *UnknownOwnerError) Error() string { return fmt.Sprintf("owner %q not found", e.Owner) }

// OwnerQuotas are one owner's quotas as the admin sees them.
type OwnerQuotas struct {
	Owner     string          `json:"owner"`
	Defaults  quota.Limits    `json:"defaults"`  // the configuration's, for every owner
	Overrides quota.Overrides `json:"overrides"` // the admin's for this owner
	Effective quota.Limits    `json:"effective"` // the defaults with the overrides applied
}

// Usage is what an owner used in one budget period, with its limits.
type Usage struct {
	Owner    string       `json:"owner"`
	Period   quota.Period `json:"period"`
	Start    time.Time    `json:"start"`
	ResetsAt time.Time    `json:"resets_at"`
	Usage    chat.Usage   `json:"usage"`
	Limits   quota.Limits `json:"limits"` // the owner's effective limits
}

// OwnerQuotas returns owner's quotas; only the admin may read them.
func (s *Service) OwnerQuotas(ctx context.Context, caller, owner string) (OwnerQuotas, error) {
	if caller != auth.AdminOwner {
		return OwnerQuotas{}, &ForbiddenError{Caller: caller, Action: "read an owner's quotas"}
	}
	o, err := s.overrides(ctx, owner)
	if err != nil {
		return OwnerQuotas{}, err
	}
	return s.ownerQuotas(owner, o), nil
}

// SetOwnerQuotas replaces owner's overrides with o (a nil field: the
// default; 0: unlimited) and returns its quotas; only the admin may set
// them. A negative value is a *chat.ValidationError naming its key, and
// nothing is written.
func (s *Service) SetOwnerQuotas(ctx context.Context, caller, owner string, o quota.Overrides) (OwnerQuotas, error) {
	if caller != auth.AdminOwner {
		return OwnerQuotas{}, &ForbiddenError{Caller: caller, Action: "set an owner's quotas"}
	}
	if err := checkOverrides(o); err != nil {
		return OwnerQuotas{}, err
	}
	err := s.st.InTx(ctx, func(tx store.Tx) error { return tx.SetOwnerQuotas(ctx, owner, o) })
	switch {
	case errors.Is(err, store.ErrNotFound):
		return OwnerQuotas{}, &UnknownOwnerError{Owner: owner}
	case err != nil:
		return OwnerQuotas{}, fmt.Errorf("set the quotas of %s: %w", owner, err)
	}
	return s.ownerQuotas(owner, o), nil
}

// Usage returns what owner used in the period p that holds at, and its
// limits. An owner reads its own; the admin any owner's.
func (s *Service) Usage(ctx context.Context, caller, owner string, p quota.Period, at time.Time) (Usage, error) {
	if owner != caller && caller != auth.AdminOwner {
		return Usage{}, &ForbiddenError{Caller: caller, Action: "read another owner's usage"}
	}
	if p != quota.Day && p != quota.Month {
		return Usage{}, &chat.ValidationError{Field: "period", Message: fmt.Sprintf("want %q or %q, got %q", quota.Day, quota.Month, p)}
	}
	o, err := s.overrides(ctx, owner)
	if err != nil {
		return Usage{}, err
	}
	start := p.Start(at)
	u, err := s.st.OwnerUsage(ctx, owner, start)
	if err != nil {
		return Usage{}, fmt.Errorf("usage of %s: %w", owner, err)
	}
	return Usage{Owner: owner, Period: p, Start: start, ResetsAt: p.End(at), Usage: u,
		Limits: o.Apply(s.cfg.Quotas.Defaults)}, nil
}

// overrides reads owner's overrides; an *UnknownOwnerError if there is no
// such owner.
func (s *Service) overrides(ctx context.Context, owner string) (quota.Overrides, error) {
	o, err := s.st.OwnerQuotas(ctx, owner)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return quota.Overrides{}, &UnknownOwnerError{Owner: owner}
	case err != nil:
		return quota.Overrides{}, fmt.Errorf("quotas of %s: %w", owner, err)
	}
	return o, nil
}

func (s *Service) ownerQuotas(owner string, o quota.Overrides) OwnerQuotas {
	d := s.cfg.Quotas.Defaults
	return OwnerQuotas{Owner: owner, Defaults: d, Overrides: o, Effective: o.Apply(d)}
}

// checkOverrides refuses a negative override, naming its key.
func checkOverrides(o quota.Overrides) error {
	for _, f := range []struct {
		key string
		neg bool
	}{
		{"spend_micros_per_day", o.SpendMicrosPerDay != nil && *o.SpendMicrosPerDay < 0},
		{"spend_micros_per_month", o.SpendMicrosPerMonth != nil && *o.SpendMicrosPerMonth < 0},
		{"tokens_per_day", o.TokensPerDay != nil && *o.TokensPerDay < 0},
		{"tokens_per_month", o.TokensPerMonth != nil && *o.TokensPerMonth < 0},
		{"requests_per_second", o.RequestsPerSecond != nil && *o.RequestsPerSecond < 0},
		{"burst", o.Burst != nil && *o.Burst < 0},
		{"max_running", o.MaxRunning != nil && *o.MaxRunning < 0},
		{"max_streams", o.MaxStreams != nil && *o.MaxStreams < 0},
		{"max_chats", o.MaxChats != nil && *o.MaxChats < 0},
		{"max_file_bytes", o.MaxFileBytes != nil && *o.MaxFileBytes < 0},
	} {
		if f.neg {
			return &chat.ValidationError{Field: f.key, Message: "must not be negative (0 is unlimited; null or absent is the default)"}
		}
	}
	if o.RequestsPerSecond != nil && !quota.RateAllowed(*o.RequestsPerSecond) {
		return &chat.ValidationError{Field: "requests_per_second",
			Message: fmt.Sprintf("must be 0 (unlimited) or at least %g (one request a day)", quota.MinRequestsPerSecond)}
	}
	return nil
}
