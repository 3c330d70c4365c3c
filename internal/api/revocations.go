package api

import (
	"context"
	"sync"
	"time"
)

// revocations tells open streams that their token was revoked, with one
// check per token every interval, however many streams the token opened
// (an app with one token and a thousand watchers makes one read, not a
// thousand).
type revocations struct {
	every   time.Duration
	revoked func(ctx context.Context, tokenID string) bool

	mu      sync.Mutex
	byToken map[string]*tokenWatch
}

// tokenWatch is the shared check of one token.
type tokenWatch struct {
	done   chan struct{} // closed once the token is found revoked
	refs   int           // the streams watching
	cancel context.CancelFunc
}

func newRevocations(every time.Duration, revoked func(ctx context.Context, tokenID string) bool) *revocations {
	return &revocations{every: every, revoked: revoked, byToken: map[string]*tokenWatch{}}
}

// watch returns a channel closed once tokenID is revoked; the stream's
// interest ends with ctx, and the check with the last stream's.
func (r *revocations) watch(ctx context.Context, tokenID string) <-chan struct{} {
	r.mu.Lock()
	w := r.byToken[tokenID]
	if w == nil {
		checkCtx, cancel := context.WithCancel(context.Background())
		w = &tokenWatch{done: make(chan struct{}), cancel: cancel}
		r.byToken[tokenID] = w
		go r.check(checkCtx, tokenID, w)
	}
	w.refs++
	r.mu.Unlock()
	context.AfterFunc(ctx, func() { r.release(tokenID, w) })
	return w.done
}

// release drops one stream's interest in w, ending the check with the last.
func (r *revocations) release(tokenID string, w *tokenWatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.refs--
	if w.refs == 0 {
		w.cancel()
		if r.byToken[tokenID] == w {
			delete(r.byToken, tokenID)
		}
	}
}

// check reads the token every r.every until it is revoked or nobody
// watches it.
func (r *revocations) check(ctx context.Context, tokenID string, w *tokenWatch) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !r.revoked(ctx, tokenID) {
				continue
			}
			r.mu.Lock()
			if r.byToken[tokenID] == w {
				delete(r.byToken, tokenID) // a stream opened later starts afresh
			}
			r.mu.Unlock()
			close(w.done)
			return
		}
	}
}
