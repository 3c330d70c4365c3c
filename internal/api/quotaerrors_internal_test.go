package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/quota"
)

// TestQuotaRefusals: every quota refusal is a 429 with its code and
// details, and a Retry-After when waiting helps.
func TestQuotaRefusals(t *testing.T) {
	resets := time.Now().Add(90 * time.Minute).UTC().Truncate(time.Second)
	for _, tc := range []struct {
		err        error
		code       string
		details    map[string]any
		retryAfter bool
	}{
		{&quota.RateError{Owner: "a", Limit: 1, Burst: 1, RetryAfter: 1500 * time.Millisecond}, "rate_limited",
			map[string]any{"retry_after_seconds": 2.0}, true},
		{fmt.Errorf("create chat: %w", &quota.ExceededError{Owner: "a", Unit: "micros", Limit: 500, Spent: 512, Period: quota.Day, ResetsAt: resets}),
			"spend_limit_exceeded", map[string]any{"limit": 500.0, "spent": 512.0, "period": "day", "resets_at": resets.Format(time.RFC3339), "unit": "micros"}, true},
		{&quota.CapError{Owner: "a", Key: "max_chats", Limit: 3}, "quota_exceeded",
			map[string]any{"quota": "max_chats", "limit": 3.0}, false},
		{&quota.CapError{Owner: "a", Key: "max_streams", Limit: 2}, "too_many_streams",
			map[string]any{"quota": "max_streams", "limit": 2.0}, false},
	} {
		rec := httptest.NewRecorder()
		writeError(rec, tc.err)
		var body struct {
			Error struct {
				Code    string         `json:"code"`
				Message string         `json:"message"`
				Details map[string]any `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusTooManyRequests || body.Error.Code != tc.code || body.Error.Message == "" || !reflect.DeepEqual(body.Error.Details, tc.details) {
			t.Errorf("%v: %d %+v, want 429 %s with details %v", tc.err, rec.Code, body.Error, tc.code, tc.details)
		}
		ra := rec.Header().Get("Retry-After")
		if (ra != "") != tc.retryAfter {
			t.Errorf("%v: Retry-After %q", tc.err, ra)
		}
	}
	// The spend limit's Retry-After is the time to the reset, rounded up.
	rec := httptest.NewRecorder()
	writeError(rec, &quota.ExceededError{Unit: "tokens", Period: quota.Month, ResetsAt: time.Now().Add(time.Hour)})
	if got := rec.Header().Get("Retry-After"); got != "3600" {
		t.Errorf("Retry-After %q, want 3600", got)
	}
}
