package api

import (
	"context"
	"testing"
	"time"
)

// TestRevocationsOneCheckPerToken: the streams of one token share one
// check, which ends them all when it finds the token revoked; the streams
// of another token keep theirs, and a token nobody watches is not read.
func TestRevocationsOneCheckPerToken(t *testing.T) {
	type ask struct {
		token  string
		answer chan bool
	}
	asks := make(chan ask)
	r := newRevocations(time.Millisecond, func(ctx context.Context, id string) bool {
		a := ask{id, make(chan bool, 1)} // buffered: a check cancelled meanwhile takes no answer
		select {
		case asks <- a:
		case <-ctx.Done():
			return false
		}
		select {
		case v := <-a.answer:
			return v
		case <-ctx.Done():
			return false
		}
	})

	const streams = 50
	var done []<-chan struct{}
	var cancels []context.CancelFunc
	for range streams {
		ctx, cancel := context.WithCancel(t.Context())
		cancels = append(cancels, cancel)
		done = append(done, r.watch(ctx, "tok-a"))
	}
	otherCtx, cancelOther := context.WithCancel(t.Context())
	other := r.watch(otherCtx, "tok-b")

	// Checks come one per token: hold tok-a's, and every other check seen
	// meanwhile must be tok-b's.
	var held ask
	for held.token != "tok-a" {
		a := <-asks
		if a.token == "tok-a" {
			held = a
			continue
		}
		a.answer <- false
	}
	r.mu.Lock()
	watches, refs := len(r.byToken), r.byToken["tok-a"].refs
	r.mu.Unlock()
	if watches != 2 || refs != streams {
		t.Fatalf("%d checks for 2 tokens, %d streams on tok-a; want 2 and %d", watches, refs, streams)
	}
	held.answer <- true // tok-a was revoked
	for i, d := range done {
		select {
		case <-d:
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %d of the revoked token was not told", i)
		}
	}
	select {
	case <-other:
		t.Fatal("tok-b's stream was told its token was revoked")
	default:
	}

	// The last stream of tok-b gone, its check stops and nothing is read.
	cancelOther()
	for _, c := range cancels {
		c()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		n := len(r.byToken)
		r.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case a := <-asks: // a check already under way when the stream left
			a.answer <- false
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d token checks left after every stream ended", n)
		}
	}
}
