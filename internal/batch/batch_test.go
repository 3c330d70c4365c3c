package batch

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// scripted is a commit function whose first call waits on a gate the test
// opens, recording each batch it gets.
type scripted struct {
	mu      sync.Mutex
	batches [][]int
	entered chan struct{} // closed when the first commit started
	gate    chan struct{} // the first commit waits for it
	fail    map[int]error // a batch holding this item fails with it
}

func (s *scripted) commit(items []int) ([]string, error) {
	s.mu.Lock()
	first := len(s.batches) == 0
	s.batches = append(s.batches, append([]int(nil), items...))
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.gate
	}
	out := make([]string, len(items))
	for i, it := range items {
		if err := s.fail[it]; err != nil {
			return nil, err
		}
		out[i] = fmt.Sprint("done ", it)
	}
	return out, nil
}

// waitQueued waits until n calls wait in b's queue.
func waitQueued[T, R any](t *testing.T, b *Batcher[T, R], n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := len(b.queue)
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatcherGroupsCallsThatArriveDuringACommit: while the leader's commit
// is held, ten more calls queue; once it is released they are committed as
// one batch, and each caller gets its own result.
func TestBatcherGroupsCallsThatArriveDuringACommit(t *testing.T) {
	s := &scripted{entered: make(chan struct{}), gate: make(chan struct{})}
	b := &Batcher[int, string]{Max: 64, Commit: s.commit}
	results := make([]string, 11)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); results[0], _ = b.Do(0) }()
	<-s.entered
	for i := 1; i <= 10; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); results[i], _ = b.Do(i) }()
	}
	waitQueued(t, b, 10)
	close(s.gate)
	wg.Wait()
	if len(s.batches) != 2 || len(s.batches[0]) != 1 || len(s.batches[1]) != 10 {
		t.Fatalf("batches %v, want [0] then the ten that waited", s.batches)
	}
	for i, r := range results {
		if r != fmt.Sprint("done ", i) {
			t.Errorf("call %d got %q", i, r)
		}
	}
}

// TestBatcherMax: calls beyond max wait for the next batch.
func TestBatcherMax(t *testing.T) {
	s := &scripted{entered: make(chan struct{}), gate: make(chan struct{})}
	b := &Batcher[int, string]{Max: 4, Commit: s.commit}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.Do(0) }()
	<-s.entered
	for i := 1; i <= 6; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); b.Do(i) }()
	}
	waitQueued(t, b, 6)
	close(s.gate)
	wg.Wait()
	var sizes []int
	for _, batch := range s.batches {
		sizes = append(sizes, len(batch))
	}
	if fmt.Sprint(sizes) != "[1 4 2]" {
		t.Fatalf("batch sizes %v, want [1 4 2]", sizes)
	}
}

// TestBatcherFailureAndPanicReachEveryCallerOfTheBatch: a failed commit is
// the error of each of its callers, a panic too; the next batch commits.
func TestBatcherFailureAndPanicReachEveryCallerOfTheBatch(t *testing.T) {
	boom := errors.New("boom")
	s := &scripted{entered: make(chan struct{}), gate: make(chan struct{}), fail: map[int]error{2: boom}}
	close(s.gate)
	b := &Batcher[int, string]{Max: 64, Commit: s.commit}
	if _, err := b.Do(2); !errors.Is(err, boom) {
		t.Fatalf("a failed batch answered %v", err)
	}
	b.Commit = func([]int) ([]string, error) { panic("kaput") }
	if _, err := b.Do(1); err == nil || err.Error() != "commit of a batch of 1 panicked: kaput" {
		t.Fatalf("a panicking batch answered %v", err)
	}
	b.Commit = s.commit
	if r, err := b.Do(3); err != nil || r != "done 3" {
		t.Fatalf("after the failures: %q, %v", r, err)
	}
}
