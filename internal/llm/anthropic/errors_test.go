package anthropic

import "testing"

func TestKind(t *testing.T) {
	tests := []struct {
		errType   string
		status    int
		kind      string
		retryable bool
	}{
		{"overloaded_error", 529, "overloaded", true},
		{"overloaded_error", 0, "overloaded", true}, // an error event mid-stream
		{"api_error", 0, "server", true},
		{"rate_limit_error", 429, "rate_limited", true},
		{"invalid_request_error", 400, "bad_request", false},
		{"not_found_error", 404, "bad_request", false},
		{"authentication_error", 401, "auth", false},
		{"permission_error", 403, "auth", false},
		{"", 529, "overloaded", true}, // a body without the error object
		{"", 503, "server", true},
		{"", 429, "rate_limited", true},
		{"", 422, "bad_request", false},
	}
	for _, tt := range tests {
		k, r := kind(tt.errType, tt.status)
		if k != tt.kind || r != tt.retryable {
			t.Errorf("kind(%q, %d) = %q, %v; want %q, %v", tt.errType, tt.status, k, r, tt.kind, tt.retryable)
		}
	}
}
