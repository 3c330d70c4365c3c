package dbutil

import (
	"errors"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

func TestLeftRunning(t *testing.T) {
	for _, from := range chat.Statuses {
		for _, to := range chat.Statuses {
			want := from == chat.Running && to != chat.Running
			if got := LeftRunning(store.Transition{From: from, To: to}); got != want {
				t.Errorf("LeftRunning(%s -> %s) = %v, want %v", from, to, got, want)
			}
		}
	}
}

func TestCheckLeaseArguments(t *testing.T) {
	if err := CheckAcquire(store.Acquire{WorkerID: "w", TTL: time.Second, Max: 1}); err != nil {
		t.Errorf("CheckAcquire(w, 1s): %v", err)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		if CheckAcquire(store.Acquire{WorkerID: "w", TTL: ttl, Max: 1}) == nil {
			t.Errorf("CheckAcquire(w, %v): no error", ttl)
		}
		if err := CheckRenew(store.Lease{ChatID: "c", WorkerID: "w"}, ttl); err == nil || errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("CheckRenew with ttl %v: %v, want an invalid-argument error", ttl, err)
		}
	}
	if CheckAcquire(store.Acquire{TTL: time.Second, Max: 1}) == nil {
		t.Error("CheckAcquire with no worker: no error")
	}
	// A lease with no worker is one that nothing holds.
	if err := CheckRenew(store.Lease{ChatID: "c"}, time.Second); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("CheckRenew with no worker: %v, want ErrLeaseLost", err)
	}
	if err := CheckLease(store.Lease{ChatID: "c", WorkerID: "w"}); err != nil {
		t.Errorf("CheckLease: %v", err)
	}
}
