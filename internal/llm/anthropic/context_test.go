package anthropic_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/anthropic"
)

// serveBody starts a server answering every request with status and body
// (as an event stream when status is 200), and a provider pointed at it; it
// counts the requests.
func serveBody(t *testing.T, status int, body string) (*anthropic.Provider, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if status == http.StatusOK {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return anthropic.New(anthropic.Config{Model: "claude-test", BaseURL: srv.URL, APIKey: "sk-ant-test"}), &n
}

func TestContextLengthErrors(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		body    string
		message string
	}{
		{
			name:    "prompt too long",
			status:  http.StatusBadRequest,
			body:    `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_011CTest"}`,
			message: "prompt is too long: 208310 tokens > 200000 maximum",
		},
		{
			name:    "no room for max_tokens",
			status:  http.StatusBadRequest,
			body:    "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again\"}}",
			message: "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again",
		},
		{
			name:    "mid-stream error event",
			status:  http.StatusOK,
			body:    "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 208310 tokens > 200000 maximum\"}}\n\n",
			message: "prompt is too long: 208310 tokens > 200000 maximum",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, requests := serveBody(t, c.status, c.body)
			r, infos, _ := retrying(p, 0)
			evs := 0
			_, err := r.Stream(context.Background(), hello(), func(llm.Event) error { evs++; return nil })
			e := apiError(t, err)
			wantStatus := c.status
			if c.status == http.StatusOK {
				wantStatus = 0
			}
			if e.Kind != llm.KindContextLength || e.Retryable || e.HTTPStatus != wantStatus || e.Message != c.message || !llm.IsContextLength(err) {
				t.Errorf("error = %+v, want %s, not retryable, HTTP %d, message %q", e, llm.KindContextLength, wantStatus, c.message)
			}
			if len(*infos) != 0 || requests.Load() != 1 || evs != 0 {
				t.Errorf("retries %+v, %d requests, %d events; want no retry, 1 request, no event", *infos, requests.Load(), evs)
			}
		})
	}
}

func TestOtherInvalidRequestsAreNotContextLength(t *testing.T) {
	p, _ := serveBody(t, http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`)
	_, _, err := run(t, p, hello())
	if e := apiError(t, err); e.Kind != "bad_request" || llm.IsContextLength(err) {
		t.Errorf("error = %+v, want bad_request", e)
	}
}
