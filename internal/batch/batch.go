// Package batch forms batches of work from callers that arrive while a
// batch is being committed: SQLite's commit groups.
package batch

import (
	"fmt"
	"sync"
)

// Batcher gathers the items that callers hand in while a batch is being
// committed, and has the first of them (the leader) commit them together,
// up to Max at a time: many small writes share one statement or one
// commit. Each caller gets its own result. Leadership passes to the next
// waiter after each batch, so no caller commits others' work for long.
type Batcher[T, R any] struct {
	Max int
	// Commit commits a batch and returns one result per item, or an
	// error that is every item's.
	Commit func(items []T) ([]R, error)

	mu      sync.Mutex
	queue   []*batchCall[T, R]
	leading bool // a caller is committing a batch
}

// batchCall is one caller waiting for its batch.
type batchCall[T, R any] struct {
	item T
	done chan batchResult[R] // the result, once its batch committed
	lead chan struct{}       // closed when this caller must lead the next batch
}

type batchResult[R any] struct {
	v   R
	err error
}

// Do queues item and returns its result once a batch committed it.
func (b *Batcher[T, R]) Do(item T) (R, error) {
	c := &batchCall[T, R]{item: item, done: make(chan batchResult[R], 1), lead: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	lead := !b.leading
	b.leading = true
	b.mu.Unlock()
	if !lead {
		select {
		case r := <-c.done:
			return r.v, r.err
		case <-c.lead:
		}
	}
	b.commitNext()
	r := <-c.done
	return r.v, r.err
}

// commitNext commits the queued items (up to Max), answers their callers,
// then hands leadership to the next waiter, if any.
func (b *Batcher[T, R]) commitNext() {
	b.mu.Lock()
	n := min(len(b.queue), max(b.Max, 1))
	calls := b.queue[:n:n]
	b.queue = b.queue[n:]
	b.mu.Unlock()

	items := make([]T, n)
	for i, c := range calls {
		items[i] = c.item
	}
	results, err := b.commitSafely(items)
	for i, c := range calls {
		if err != nil {
			c.done <- batchResult[R]{err: err}
		} else {
			c.done <- batchResult[R]{v: results[i]}
		}
	}

	b.mu.Lock()
	if len(b.queue) == 0 {
		b.leading = false
	} else {
		close(b.queue[0].lead)
	}
	b.mu.Unlock()
}

// commitSafely runs commit, turning a panic into every item's error (so
// that leadership still passes on) and checking it answered each item.
func (b *Batcher[T, R]) commitSafely(items []T) (results []R, err error) {
	defer func() {
		if p := recover(); p != nil {
			results, err = nil, fmt.Errorf("commit of a batch of %d panicked: %v", len(items), p)
		}
	}()
	results, err = b.Commit(items)
	if err == nil && len(results) != len(items) {
		return nil, fmt.Errorf("a batch of %d got %d results", len(items), len(results))
	}
	return results, err
}
