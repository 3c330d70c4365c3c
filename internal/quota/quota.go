// Package quota holds what one owner may use of a shared server: spend and
// token budgets per day and month, request rates, and caps on running
// chats, open streams, chats and stored file bytes. The configuration
// gives every owner the same defaults; an admin may override any of them
// for one owner.
//
// Budgets are reckoned from the usage the store records with each step, in
// UTC calendar days and months. They fail closed: new work is refused once
// a budget is reached, and a running chat stops after the step that
// reached it.
package quota

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
)

// Limits are one owner's quotas. A zero field is unlimited.
type Limits struct {
	SpendMicrosPerDay   int64   `json:"spend_micros_per_day" yaml:"spend_micros_per_day"`
	SpendMicrosPerMonth int64   `json:"spend_micros_per_month" yaml:"spend_micros_per_month"`
	TokensPerDay        int64   `json:"tokens_per_day" yaml:"tokens_per_day"`
	TokensPerMonth      int64   `json:"tokens_per_month" yaml:"tokens_per_month"`
	RequestsPerSecond   float64 `json:"requests_per_second" yaml:"requests_per_second"`
	Burst               int     `json:"burst" yaml:"burst"`
	MaxRunning          int     `json:"max_running" yaml:"max_running"`
	MaxStreams          int     `json:"max_streams" yaml:"max_streams"`
	MaxChats            int     `json:"max_chats" yaml:"max_chats"`
	MaxFileBytes        int64   `json:"max_file_bytes" yaml:"max_file_bytes"`
}

// Check reports the first negative limit.
func (l Limits) Check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"spend_micros_per_day", float64(l.SpendMicrosPerDay)},
		{"spend_micros_per_month", float64(l.SpendMicrosPerMonth)},
		{"tokens_per_day", float64(l.TokensPerDay)},
		{"tokens_per_month", float64(l.TokensPerMonth)},
		{"requests_per_second", l.RequestsPerSecond},
		{"burst", float64(l.Burst)},
		{"max_running", float64(l.MaxRunning)},
		{"max_streams", float64(l.MaxStreams)},
		{"max_chats", float64(l.MaxChats)},
		{"max_file_bytes", float64(l.MaxFileBytes)},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s must not be negative (0 is unlimited)", f.name)
		}
	}
	if !RateAllowed(l.RequestsPerSecond) {
		return fmt.Errorf("requests_per_second must be 0 (unlimited) or at least %g (one a day)", MinRequestsPerSecond)
	}
	return nil
}

// RateAllowed reports whether rps may be a requests_per_second: 0
// (unlimited) or at least MinRequestsPerSecond.
func RateAllowed(rps float64) bool { return rps == 0 || rps >= MinRequestsPerSecond }

// HasBudget reports whether any spend or token budget is set.
func (l Limits) HasBudget() bool {
	return l.SpendMicrosPerDay > 0 || l.SpendMicrosPerMonth > 0 || l.TokensPerDay > 0 || l.TokensPerMonth > 0
}

// Overrides are the limits an admin set for one owner; a nil field takes
// the default. Stored as JSON, with the keys of Limits.
type Overrides struct {
	SpendMicrosPerDay   *int64   `json:"spend_micros_per_day,omitempty"`
	SpendMicrosPerMonth *int64   `json:"spend_micros_per_month,omitempty"`
	TokensPerDay        *int64   `json:"tokens_per_day,omitempty"`
	TokensPerMonth      *int64   `json:"tokens_per_month,omitempty"`
	RequestsPerSecond   *float64 `json:"requests_per_second,omitempty"`
	Burst               *int     `json:"burst,omitempty"`
	MaxRunning          *int     `json:"max_running,omitempty"`
	MaxStreams          *int     `json:"max_streams,omitempty"`
	MaxChats            *int     `json:"max_chats,omitempty"`
	MaxFileBytes        *int64   `json:"max_file_bytes,omitempty"`
}

// Apply returns d with the overridden fields replaced.
func (o Overrides) Apply(d Limits) Limits {
	set(&d.SpendMicrosPerDay, o.SpendMicrosPerDay)
	set(&d.SpendMicrosPerMonth, o.SpendMicrosPerMonth)
	set(&d.TokensPerDay, o.TokensPerDay)
	set(&d.TokensPerMonth, o.TokensPerMonth)
	set(&d.RequestsPerSecond, o.RequestsPerSecond)
	set(&d.Burst, o.Burst)
	set(&d.MaxRunning, o.MaxRunning)
	set(&d.MaxStreams, o.MaxStreams)
	set(&d.MaxChats, o.MaxChats)
	set(&d.MaxFileBytes, o.MaxFileBytes)
	return d
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// Period is a budget's period: a UTC calendar day or month.
type Period string

const (
	Day   Period = "day"
	Month Period = "month"
)

// Start returns the start of the period that holds t.
func (p Period) Start(t time.Time) time.Time {
	t = t.UTC()
	if p == Month {
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// End returns when the period that holds t ends: when its budget resets.
func (p Period) End(t time.Time) time.Time {
	s := p.Start(t)
	if p == Month {
		return s.AddDate(0, 1, 0)
	}
	return s.AddDate(0, 0, 1)
}

// ExceededError is a spend or token budget that is reached: new work is
// refused until the period ends or the limit is raised.
type ExceededError struct {
	Owner    string
	Unit     string // "micros" (spend) or "tokens"
	Limit    int64
	Spent    int64
	Period   Period
	ResetsAt time.Time
}

func (e *ExceededError) Error() string {
	what := "spend limit"
	if e.Unit == "tokens" {
		what = "token limit"
	}
	return fmt.Sprintf("the %s %s of %d %s is reached (%d spent); it resets at %s, or an admin can raise it",
		e.Period, what, e.Limit, e.Unit, e.Spent, e.ResetsAt.Format(time.RFC3339))
}

// Reader is what a Budget reads; the store implements it.
type Reader interface {
	// OwnerQuotas returns the owner's overrides (none set: the zero
	// value); store.ErrNotFound if the owner does not exist.
	OwnerQuotas(ctx context.Context, owner string) (Overrides, error)
	// OwnerUsage returns the usage recorded for the owner's chats on the
	// UTC days from since's on.
	OwnerUsage(ctx context.Context, owner string, since time.Time) (chat.Usage, error)
}

// Budget checks owners' spend and token budgets.
type Budget struct {
	Defaults Limits
	Now      func() time.Time // the clock periods are reckoned on; nil: time.Now
}

func (b *Budget) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Limits returns the owner's effective limits: the defaults with its
// overrides applied.
func (b *Budget) Limits(ctx context.Context, r Reader, owner string) (Limits, error) {
	o, err := r.OwnerQuotas(ctx, owner)
	if err != nil {
		return Limits{}, fmt.Errorf("quotas of %s: %w", owner, err)
	}
	return o.Apply(b.Defaults), nil
}

// Check returns an *ExceededError when one of the owner's budgets is
// reached (spent >= limit), nil when there is room.
func (b *Budget) Check(ctx context.Context, r Reader, owner string) error {
	l, err := b.Limits(ctx, r, owner)
	if err != nil {
		return err
	}
	return b.CheckLimits(ctx, r, owner, l)
}

// CheckLimits is Check with the owner's limits already read.
func (b *Budget) CheckLimits(ctx context.Context, r Reader, owner string, l Limits) error {
	now := b.now()
	for _, p := range []struct {
		period        Period
		spend, tokens int64
	}{{Day, l.SpendMicrosPerDay, l.TokensPerDay}, {Month, l.SpendMicrosPerMonth, l.TokensPerMonth}} {
		if p.spend <= 0 && p.tokens <= 0 {
			continue
		}
		u, err := r.OwnerUsage(ctx, owner, p.period.Start(now))
		if err != nil {
			return fmt.Errorf("usage of %s: %w", owner, err)
		}
		if p.spend > 0 && u.CostMicros >= p.spend {
			return &ExceededError{Owner: owner, Unit: "micros", Limit: p.spend, Spent: u.CostMicros, Period: p.period, ResetsAt: p.period.End(now)}
		}
		if t := u.InputTokens + u.OutputTokens; p.tokens > 0 && t >= p.tokens {
			return &ExceededError{Owner: owner, Unit: "tokens", Limit: p.tokens, Spent: t, Period: p.period, ResetsAt: p.period.End(now)}
		}
	}
	return nil
}

// CapError refuses what would pass one of an owner's caps (max_chats,
// max_streams, max_file_bytes).
type CapError struct {
	Owner string
	Key   string // the quota's key, as in Limits' JSON
	Limit int64
}

func (e *CapError) Error() string {
	return fmt.Sprintf("the owner's %s quota of %d is reached; free some up, or an admin can raise it", e.Key, e.Limit)
}
