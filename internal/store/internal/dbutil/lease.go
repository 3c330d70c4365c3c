package dbutil

import (
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// CheckAcquire refuses a lease request that could never be fenced or that
// would be expired at once.
func CheckAcquire(workerID string, ttl time.Duration) error {
	if workerID == "" {
		return errors.New("empty worker id")
	}
	return checkTTL(ttl)
}

// CheckLease refuses a lease that no acquisition can have returned: an empty
// worker id (which every chat that never ran carries) holds nothing.
func CheckLease(l store.Lease) error {
	if l.WorkerID == "" {
		return fmt.Errorf("chat %s: empty worker id: %w", l.ChatID, store.ErrLeaseLost)
	}
	return nil
}

// CheckRenew refuses to renew a lease CheckLease refuses, or for a ttl that
// is not positive.
func CheckRenew(l store.Lease, ttl time.Duration) error {
	if err := CheckLease(l); err != nil {
		return err
	}
	return checkTTL(ttl)
}

// checkTTL refuses a lease that would expire as it starts.
func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("lease ttl %v is not positive", ttl)
	}
	return nil
}

// LeftRunning reports whether a transition ends a run, so that the store
// clears the chat's worker and lease expiry (the generation stays).
func LeftRunning(t store.Transition) bool {
	return t.From == chat.Running && t.To != chat.Running
}

// MaxReserve bounds one ReserveMessageIDs call.
const MaxReserve = 1000

// CheckReserve checks the count of a ReserveMessageIDs call.
func CheckReserve(n int) error {
	if n < 1 || n > MaxReserve {
		return fmt.Errorf("reserve message ids: count %d is not in 1..%d", n, MaxReserve)
	}
	return nil
}
