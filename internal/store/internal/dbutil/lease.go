package dbutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// CheckAcquire refuses a lease request that could never be fenced or that
// would be expired at once.
func CheckAcquire(a store.Acquire) error {
	if a.WorkerID == "" {
		return errors.New("empty worker id")
	}
	if a.Max < 1 || a.Max > store.MaxAcquire {
		return fmt.Errorf("count %d is not in 1..%d", a.Max, store.MaxAcquire)
	}
	if a.MaxRunning < 0 {
		return fmt.Errorf("max running %d is negative", a.MaxRunning)
	}
	return checkTTL(a.TTL)
}

// Leases returns the leases of chats just acquired by workerID, in the
// order of chats, which it sorts oldest updated first (RETURNING has no
// order).
func Leases(chats []chat.Chat, workerID string) []store.Lease {
	slices.SortFunc(chats, func(a, b chat.Chat) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	leases := make([]store.Lease, len(chats))
	for i, c := range chats {
		leases[i] = store.Lease{ChatID: c.ID, WorkerID: workerID, Generation: c.LeaseGeneration}
	}
	return leases
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

// CheckSinceCompaction checks a SinceCompaction call: 1..MaxPageSize chats
// and a limit of 1..MaxPageSize. It returns the ids as a JSON array, as
// SQLite's json_each takes them.
func CheckSinceCompaction(chatIDs []string, limit int) ([]byte, error) {
	if len(chatIDs) < 1 || len(chatIDs) > store.MaxPageSize || limit < 1 || limit > store.MaxPageSize {
		return nil, fmt.Errorf("messages since compaction: %d chats and a limit of %d; both must be in 1..%d", len(chatIDs), limit, store.MaxPageSize)
	}
	return json.Marshal(chatIDs)
}

// RunAsked reports whether a transition starts a run a person asked for
// (a message, a retry, an edit, a regeneration, a compaction: waiting or
// error to pending), which starts the count of the turn's output repairs
// over.
func RunAsked(t store.Transition) bool {
	return (t.From == chat.Waiting || t.From == chat.Error) && t.To == chat.Pending
}
