package openai_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// retrier wraps p in llm.Retrying with a fake clock, recording the retries
// and the waits.
type retrier struct {
	mu      sync.Mutex
	retries []llm.RetryInfo
	waits   []time.Duration
}

func (r *retrier) wrap(p llm.Provider, firstChunk time.Duration) llm.Provider {
	return llm.Retrying(p, llm.RetryPolicy{
		MaxAttempts:       3,
		BaseDelay:         10 * time.Millisecond,
		MaxDelay:          10 * time.Second,
		FirstChunkTimeout: firstChunk,
		Rand:              func() float64 { return 0.5 },
		Sleep: func(ctx context.Context, d time.Duration) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.waits = append(r.waits, d)
			return ctx.Err()
		},
	}, func(i llm.RetryInfo) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.retries = append(r.retries, i)
	})
}

func TestRateLimitRetriedAfterRetryAfter(t *testing.T) {
	for _, after := range []time.Duration{2 * time.Second, 1500 * time.Millisecond} {
		t.Run(after.String(), func(t *testing.T) {
			eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
				f.Push(llmtest.Turn{Status: 429, RetryAfter: after}, llmtest.Turn{Text: "made it"})
				var r retrier
				res, events, err := stream(t, r.wrap(p, 0), hello)
				if err != nil {
					t.Fatalf("Stream: %v", err)
				}
				if text, _ := joined(events, llm.TextDelta); text != "made it" || res.Parts[0].Text != "made it" {
					t.Errorf("events %+v, result %+v", events, res)
				}
				if len(r.retries) != 1 {
					t.Fatalf("retries = %+v, want 1", r.retries)
				}
				info := r.retries[0]
				if info.Attempt != 2 || info.Delay != after || info.Err.Kind != "rate_limited" || info.Err.HTTPStatus != 429 || info.Err.Provider != a.name {
					t.Errorf("retry = %+v (error %+v), want attempt 2 after %v", info, info.Err, after)
				}
				if len(r.waits) != 1 || r.waits[0] != after {
					t.Errorf("waits = %v", r.waits)
				}
				if n := len(f.Requests()); n != 2 {
					t.Errorf("%d requests, want 2", n)
				}
			})
		})
	}
}

func TestCutStream(t *testing.T) {
	t.Run("is a retryable error", func(t *testing.T) {
		eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
			f.Push(llmtest.Turn{Text: "a long answer, cut short", CutAfter: a.cutAfterTwoDeltas})
			_, events, err := stream(t, p, hello)
			if e := llmError(t, err); e.Kind != "cut_stream" || !e.Retryable || e.Provider != a.name {
				t.Errorf("error = %+v", e)
			}
			if text, _ := joined(events, llm.TextDelta); text != "a long a" {
				t.Errorf("streamed %q before the cut", text)
			}
		})
	})
	t.Run("retried when nothing was emitted", func(t *testing.T) {
		eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
			f.Push(llmtest.Turn{Text: "lost", CutAfter: 1}, llmtest.Turn{Text: "whole answer"})
			var r retrier
			res, events, err := stream(t, r.wrap(p, 0), hello)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if text, _ := joined(events, llm.TextDelta); text != "whole answer" || res.Parts[0].Text != "whole answer" {
				t.Errorf("events %+v, result %+v", events, res)
			}
			if len(r.retries) != 1 || r.retries[0].Err.Kind != "cut_stream" {
				t.Errorf("retries = %+v", r.retries)
			}
		})
	})
	t.Run("not retried once deltas were emitted", func(t *testing.T) {
		eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
			f.Push(llmtest.Turn{Text: "partial answer", CutAfter: a.cutAfterTwoDeltas}, llmtest.Turn{Text: "never sent"})
			var r retrier
			_, events, err := stream(t, r.wrap(p, 0), hello)
			if e := llmError(t, err); e.Kind != "cut_stream" {
				t.Errorf("error = %+v", e)
			}
			if text, _ := joined(events, llm.TextDelta); text != "partial " {
				t.Errorf("streamed %q, want the two deltas once", text)
			}
			if len(r.retries) != 0 || len(f.Requests()) != 1 {
				t.Errorf("retries = %+v, requests = %d", r.retries, len(f.Requests()))
			}
		})
	})
}

func TestSlowFirstChunkTimesOutThenRetrySucceeds(t *testing.T) {
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		// The first turn would hold its first event for a minute: only the
		// first-chunk timeout can end that attempt in time.
		f.Push(llmtest.Turn{Text: "too late", FirstChunkDelay: time.Minute}, llmtest.Turn{Text: "on time"})
		var r retrier
		start := time.Now()
		res, events, err := stream(t, r.wrap(p, 100*time.Millisecond), hello)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if text, _ := joined(events, llm.TextDelta); text != "on time" || res.Parts[0].Text != "on time" {
			t.Errorf("events %+v, result %+v", events, res)
		}
		if len(r.retries) != 1 || r.retries[0].Err.Kind != "timeout" || !r.retries[0].Err.Retryable || r.retries[0].Err.Provider != a.name {
			t.Fatalf("retries = %+v", r.retries)
		}
		if n := len(f.Requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %v", d)
		}
	})
}
