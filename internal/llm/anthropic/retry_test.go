package anthropic_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// retrying wraps p in llm.Retrying with no jitter and a clock that records
// the waits instead of sleeping; it returns the retries seen and the waits.
func retrying(p llm.Provider, firstChunk time.Duration) (llm.Provider, *[]llm.RetryInfo, *[]time.Duration) {
	var infos []llm.RetryInfo
	var waits []time.Duration
	policy := llm.RetryPolicy{
		MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: 30 * time.Second,
		FirstChunkTimeout: firstChunk,
		Sleep:             func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil },
		Rand:              func() float64 { return 0 },
	}
	return llm.Retrying(p, policy, func(ri llm.RetryInfo) { infos = append(infos, ri) }), &infos, &waits
}

func TestRateLimitRetriedAfterRetryAfter(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Status: 429, RetryAfter: 3 * time.Second}, llmtest.Turn{Text: "second time lucky"})
	r, infos, waits := retrying(p, 0)

	res, err := r.Stream(context.Background(), hello(), func(llm.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Parts) != 1 || res.Parts[0].Text != "second time lucky" {
		t.Errorf("parts = %+v, want the second turn's answer", res.Parts)
	}
	if n := len(f.Requests()); n != 2 {
		t.Errorf("the server saw %d requests, want 2", n)
	}
	if len(*infos) != 1 {
		t.Fatalf("retries = %+v, want 1", *infos)
	}
	ri := (*infos)[0]
	if ri.Attempt != 2 || ri.Delay != 3*time.Second || ri.Err.Kind != "rate_limited" || ri.Err.HTTPStatus != 429 {
		t.Errorf("retry = {attempt %d, delay %v, err %v}; want attempt 2 after the server's 3s, rate_limited 429",
			ri.Attempt, ri.Delay, ri.Err)
	}
	if len(*waits) != 1 || (*waits)[0] != 3*time.Second {
		t.Errorf("waits = %v, want [3s]", *waits)
	}
}

func TestSlowFirstChunkRetriedAfterTimeout(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Text: "too late", FirstChunkDelay: time.Minute}, llmtest.Turn{Text: "prompt"})
	r, infos, _ := retrying(p, 100*time.Millisecond)

	start := time.Now()
	res, err := r.Stream(context.Background(), hello(), func(llm.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v; the slow attempt was not cut by the 100ms first-chunk timeout", d)
	}
	if len(res.Parts) != 1 || res.Parts[0].Text != "prompt" {
		t.Errorf("parts = %+v, want the second turn's answer", res.Parts)
	}
	if len(*infos) != 1 || (*infos)[0].Err.Kind != "timeout" || (*infos)[0].Err.Provider != "anthropic" {
		t.Errorf("retries = %+v, want one after an anthropic timeout", *infos)
	}
}
