package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Limits are an owner's quotas (docs/operations.md); a zero field is
// unlimited.
type Limits struct {
	SpendMicrosPerDay   int64   `json:"spend_micros_per_day"`
	SpendMicrosPerMonth int64   `json:"spend_micros_per_month"`
	TokensPerDay        int64   `json:"tokens_per_day"`
	TokensPerMonth      int64   `json:"tokens_per_month"`
	RequestsPerSecond   float64 `json:"requests_per_second"`
	Burst               int     `json:"burst"`
	MaxRunning          int     `json:"max_running"`
	MaxStreams          int     `json:"max_streams"`
	MaxChats            int     `json:"max_chats"`
	MaxFileBytes        int64   `json:"max_file_bytes"`
}

// QuotaOverrides are the quotas the admin set for one owner: a nil field
// takes the server's default, a pointer to 0 is unlimited.
type QuotaOverrides struct {
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

// OwnerQuotas are one owner's quotas: the server's defaults, the admin's
// overrides, and the limits that hold (the defaults with the overrides).
type OwnerQuotas struct {
	Owner     string         `json:"owner"`
	Defaults  Limits         `json:"defaults"`
	Overrides QuotaOverrides `json:"overrides"`
	Effective Limits         `json:"effective"`
}

// Budget periods: a UTC calendar day or month.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// UsageReport is what an owner used in one budget period, with its limits.
type UsageReport struct {
	Owner    string    `json:"owner"`
	Period   string    `json:"period"` // PeriodDay or PeriodMonth
	Start    time.Time `json:"start"`
	ResetsAt time.Time `json:"resets_at"`
	Usage    Usage     `json:"usage"`
	Limits   Limits    `json:"limits"` // the owner's effective limits
}

// Quotas reads an owner's quotas. Only the admin's token may: others get
// an *APIError 403 "forbidden"; an unknown owner is a 404.
func (c *Client) Quotas(ctx context.Context, owner string) (OwnerQuotas, error) {
	var q OwnerQuotas
	err := c.do(ctx, http.MethodGet, quotasPath(owner), nil, nil, &q)
	return q, err
}

// SetQuotas replaces an owner's overrides with o and returns its quotas.
// Only the admin's token may. A negative value is an *APIError 400
// "invalid_field" naming its key, and nothing is changed.
func (c *Client) SetQuotas(ctx context.Context, owner string, o QuotaOverrides) (OwnerQuotas, error) {
	var q OwnerQuotas
	err := c.do(ctx, http.MethodPut, quotasPath(owner), nil, o, &q)
	return q, err
}

// Usage reads what an owner used in the current period (PeriodDay, or ""
// for it, or PeriodMonth). owner "" is the token's own; another owner's
// needs the admin's token.
func (c *Client) Usage(ctx context.Context, period, owner string) (UsageReport, error) {
	q := url.Values{}
	if period != "" {
		q.Set("period", period)
	}
	if owner != "" {
		q.Set("owner", owner)
	}
	var u UsageReport
	err := c.do(ctx, http.MethodGet, "/api/v1/usage", q, nil, &u)
	return u, err
}

func quotasPath(owner string) string { return "/api/v1/owners/" + url.PathEscape(owner) + "/quotas" }
