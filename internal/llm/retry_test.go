package llm

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
)

// scripted is a provider whose attempts are functions, one per call.
type scripted struct {
	calls    int
	attempts []func(ctx context.Context, emit func(Event) error) (Result, error)
}

func (s *scripted) Name() string { return "scripted" }

func (s *scripted) Stream(ctx context.Context, _ Request, emit func(Event) error) (Result, error) {
	f := s.attempts[s.calls]
	s.calls++
	return f(ctx, emit)
}

func fail(err *Error) func(context.Context, func(Event) error) (Result, error) {
	return func(context.Context, func(Event) error) (Result, error) { return Result{}, err }
}

func succeed(text string) func(context.Context, func(Event) error) (Result, error) {
	return func(_ context.Context, emit func(Event) error) (Result, error) {
		if err := emit(Event{Type: TextDelta, Text: text}); err != nil {
			return Result{}, err
		}
		return Result{Parts: []chat.Part{chat.TextPart(text)}, FinishReason: "stop"}, nil
	}
}

// fakeClock records the waits asked of it without waiting.
type fakeClock struct{ waits []time.Duration }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.waits = append(c.waits, d)
	return ctx.Err()
}

func policy(clock *fakeClock) RetryPolicy {
	return RetryPolicy{
		MaxAttempts: 4,
		BaseDelay:   100 * time.Millisecond,
		MaxDelay:    time.Second,
		Sleep:       clock.Sleep,
		Rand:        func() float64 { return 0.5 },
	}
}

var (
	rateLimited = &Error{Kind: "rate_limited", Provider: "scripted", HTTPStatus: 429, Retryable: true, Message: "slow down"}
	badRequest  = &Error{Kind: "bad_request", Provider: "scripted", HTTPStatus: 400, Message: "no"}
)

func TestRetryingRetriesRetryableErrorsWithBackoff(t *testing.T) {
	p := &scripted{attempts: [](func(context.Context, func(Event) error) (Result, error)){
		fail(rateLimited), fail(rateLimited), fail(rateLimited), succeed("ok"),
	}}
	clock := &fakeClock{}
	var infos []RetryInfo
	r := Retrying(p, policy(clock), func(i RetryInfo) { infos = append(infos, i) })

	var got []Event
	res, err := r.Stream(context.Background(), Request{}, func(e Event) error { got = append(got, e); return nil })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if res.Parts[0].Text != "ok" || len(got) != 1 {
		t.Fatalf("result %+v, events %+v", res, got)
	}
	// Full jitter with Rand = 0.5: half of 100ms, 200ms, 400ms.
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	if !reflect.DeepEqual(clock.waits, want) {
		t.Errorf("waits = %v, want %v", clock.waits, want)
	}
	if len(infos) != 3 {
		t.Fatalf("onRetry called %d times, want 3", len(infos))
	}
	for i, info := range infos {
		if info.Attempt != i+2 || info.Delay != want[i] || info.Err != rateLimited {
			t.Errorf("retry %d: %+v", i, info)
		}
	}
}

func TestRetryingBackoffIsCapped(t *testing.T) {
	clock := &fakeClock{}
	pol := policy(clock)
	pol.MaxAttempts = 8
	pol.Rand = func() float64 { return 0.999999 }
	var attempts [](func(context.Context, func(Event) error) (Result, error))
	for range 8 {
		attempts = append(attempts, fail(rateLimited))
	}
	r := Retrying(&scripted{attempts: attempts}, pol, nil)
	_, err := r.Stream(context.Background(), Request{}, func(Event) error { return nil })
	if !errors.Is(err, rateLimited) {
		t.Fatalf("err = %v, want the last attempt's error", err)
	}
	if len(clock.waits) != 7 {
		t.Fatalf("%d waits, want 7", len(clock.waits))
	}
	for i, d := range clock.waits {
		if d > time.Second {
			t.Errorf("wait %d = %v exceeds MaxDelay", i, d)
		}
	}
	if last := clock.waits[6]; last < 999*time.Millisecond {
		t.Errorf("late waits should reach the cap, got %v", last)
	}
}

func TestRetryingHonoursLongerRetryAfterCapped(t *testing.T) {
	clock := &fakeClock{}
	withAfter := func(d time.Duration) *Error {
		e := *rateLimited
		e.RetryAfter = d
		return &e
	}
	p := &scripted{attempts: [](func(context.Context, func(Event) error) (Result, error)){
		fail(withAfter(700 * time.Millisecond)), // longer than the 50ms drawn: wins
		fail(withAfter(time.Millisecond)),       // shorter than the 100ms drawn: ignored
		fail(withAfter(time.Hour)),              // capped at MaxDelay
		succeed("ok"),
	}}
	if _, err := Retrying(p, policy(clock), nil).Stream(context.Background(), Request{}, func(Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{700 * time.Millisecond, 100 * time.Millisecond, time.Second}
	if !reflect.DeepEqual(clock.waits, want) {
		t.Errorf("waits = %v, want %v", clock.waits, want)
	}
}

func TestRetryingDoesNotRetryNonRetryable(t *testing.T) {
	clock := &fakeClock{}
	p := &scripted{attempts: [](func(context.Context, func(Event) error) (Result, error)){fail(badRequest), succeed("no")}}
	called := false
	_, err := Retrying(p, policy(clock), func(RetryInfo) { called = true }).Stream(context.Background(), Request{}, func(Event) error { return nil })
	if !errors.Is(err, badRequest) || p.calls != 1 || called {
		t.Fatalf("err = %v, calls = %d, onRetry called = %v", err, p.calls, called)
	}
	plain := errors.New("not an llm.Error")
	p = &scripted{attempts: [](func(context.Context, func(Event) error) (Result, error)){
		func(context.Context, func(Event) error) (Result, error) { return Result{}, plain },
	}}
	if _, err := Retrying(p, policy(clock), nil).Stream(context.Background(), Request{}, func(Event) error { return nil }); err != plain {
		t.Fatalf("err = %v, want the plain error as is", err)
	}
}

func TestRetryingDoesNotRetryAfterEmitting(t *testing.T) {
	clock := &fakeClock{}
	p := &scripted{attempts: [](func(context.Context, func(Event) error) (Result, error)){
		func(_ context.Context, emit func(Event) error) (Result, error) {
			if err := emit(Event{Type: TextDelta, Text: "partial"}); err != nil {
				return Result{}, err
			}
			return Result{}, &Error{Kind: "cut_stream", Retryable: true}
		},
		succeed("again"),
	}}
	var got []Event
	_, err := Retrying(p, policy(clock), nil).Stream(context.Background(), Request{}, func(e Event) error { got = append(got, e); return nil })
	var perr *Error
	if !errors.As(err, &perr) || perr.Kind != "cut_stream" {
		t.Fatalf("err = %v, want the cut_stream error", err)
	}
	if p.calls != 1 || len(got) != 1 || len(clock.waits) != 0 {
		t.Fatalf("calls = %d, events = %v, waits = %v", p.calls, got, clock.waits)
	}
}

func TestRetryingFirstChunkTimeout(t *testing.T) {
	clock := &fakeClock{}
	pol := policy(clock)
	pol.FirstChunkTimeout = 20 * time.Millisecond
	p := &scripted{attempts: [](func(context.Context, func(Event) error) (Result, error)){
		// Never produces anything: only the timeout can end it.
		func(ctx context.Context, _ func(Event) error) (Result, error) {
			<-ctx.Done()
			return Result{}, ctx.Err()
		},
		succeed("fast"),
	}}
	var infos []RetryInfo
	res, err := Retrying(p, pol, func(i RetryInfo) { infos = append(infos, i) }).Stream(context.Background(), Request{}, func(Event) error { return nil })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if res.Parts[0].Text != "fast" {
		t.Fatalf("result = %+v", res)
	}
	if len(infos) != 1 || infos[0].Err.Kind != "timeout" || !infos[0].Err.Retryable || infos[0].Err.Provider != "scripted" {
		t.Fatalf("retries = %+v", infos)
	}
	if !errors.Is(infos[0].Err, context.Canceled) {
		t.Errorf("timeout error should wrap the attempt's cancellation, got %v", infos[0].Err.Err)
	}
}

func TestRetryingFirstChunkTimeoutLastAttempt(t *testing.T) {
	pol := policy(&fakeClock{})
	pol.MaxAttempts = 1
	pol.FirstChunkTimeout = 5 * time.Millisecond
	p := &scripted{attempts: [](func(context.Context, func(Event) error) (Result, error)){
		func(ctx context.Context, _ func(Event) error) (Result, error) {
			<-ctx.Done()
			return Result{}, ctx.Err()
		},
	}}
	_, err := Retrying(p, pol, nil).Stream(context.Background(), Request{}, func(Event) error { return nil })
	var perr *Error
	if !errors.As(err, &perr) || perr.Kind != "timeout" {
		t.Fatalf("err = %v, want a timeout *Error", err)
	}
}

func TestRetryingFirstChunkTimeoutSparesStartedStreams(t *testing.T) {
	pol := policy(&fakeClock{})
	pol.FirstChunkTimeout = 5 * time.Millisecond
	p := &scripted{attempts: [](func(context.Context, func(Event) error) (Result, error)){
		func(ctx context.Context, emit func(Event) error) (Result, error) {
			if err := emit(Event{Type: TextDelta, Text: "a"}); err != nil {
				return Result{}, err
			}
			// Well past the first-chunk timeout: it must not fire any more.
			select {
			case <-ctx.Done():
				return Result{}, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			return Result{Parts: []chat.Part{chat.TextPart("a")}}, nil
		},
	}}
	if _, err := Retrying(p, pol, nil).Stream(context.Background(), Request{}, func(Event) error { return nil }); err != nil {
		t.Fatalf("Stream: %v", err)
	}
}

func TestRetryingStopsWhenContextEndsDuringWait(t *testing.T) {
	pol := policy(&fakeClock{})
	pol.Sleep = nil // a real timer
	pol.BaseDelay = time.Hour
	pol.MaxDelay = time.Hour
	pol.Rand = func() float64 { return 0.999 }
	ctx, cancel := context.WithCancel(context.Background())
	p := &scripted{attempts: [](func(context.Context, func(Event) error) (Result, error)){fail(rateLimited), succeed("never")}}
	done := make(chan error, 1)
	go func() {
		_, err := Retrying(p, pol, func(RetryInfo) { cancel() }).Stream(ctx, Request{}, func(Event) error { return nil })
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stream kept waiting after its context was cancelled")
	}
	if p.calls != 1 {
		t.Errorf("calls = %d, want 1", p.calls)
	}
}

func TestRetryingKeepsName(t *testing.T) {
	r := Retrying(&scripted{}, RetryPolicy{}, nil)
	if n, ok := r.(Named); !ok || n.Name() != "scripted" {
		t.Fatalf("Retrying provider should report the wrapped name")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		header map[string]string
		want   time.Duration
	}{
		{map[string]string{}, 0},
		{map[string]string{"Retry-After": "2"}, 2 * time.Second},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": "-3"}, 0},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "1"}, 250 * time.Millisecond},
		{map[string]string{"Retry-After-Ms": "x", "Retry-After": "1"}, time.Second},
	}
	for _, c := range cases {
		h := http.Header{}
		for k, v := range c.header {
			h.Set(k, v)
		}
		if got := ParseRetryAfter(h, now); got != c.want {
			t.Errorf("ParseRetryAfter(%v) = %v, want %v", c.header, got, c.want)
		}
	}
}
