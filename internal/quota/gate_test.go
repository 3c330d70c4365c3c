package quota_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/parleyhq/parley/internal/quota"
)

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("wrapped: %w", &quota.RateError{Owner: "a"}), "rate_limited"},
		{&quota.ExceededError{Owner: "a", Unit: "micros"}, "spend_limit"},
		{&quota.ExceededError{Owner: "a", Unit: "tokens"}, "token_limit"},
		{&quota.CapError{Owner: "a", Key: "max_chats"}, "max_chats"},
	} {
		owner, reason, ok := quota.Refusal(tc.err)
		if !ok || owner != "a" || reason != tc.reason {
			t.Errorf("Refusal(%v) = %q, %q, %v; want a, %q", tc.err, owner, reason, ok, tc.reason)
		}
	}
	if _, _, ok := quota.Refusal(errors.New("other")); ok {
		t.Error("another error is a refusal")
	}
}
