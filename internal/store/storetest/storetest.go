// Package storetest is the conformance suite of store.Store: every behaviour
// the rest of parley relies on is a named subtest here, run against each
// backend (sqlite, postgres), so a new backend is one test file.
package storetest

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// opener returns a new, migrated, empty store and closes it when t ends.
type opener func(t *testing.T) store.Store

// Run runs the conformance suite. Each subtest opens a new, migrated, empty
// store with open (which closes it when its t ends); subtests run in
// parallel, so open must be safe to call concurrently.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	groups := []struct {
		name  string
		tests map[string]func(*testing.T, opener)
	}{
		{"Chats", chatTests},
		{"Transitions", transitionTests},
		{"ListChats", listTests},
		{"Messages", messageTests},
		{"Queued", queuedTests},
		{"Owners", ownerTests},
		{"Tx", txTests},
		{"Leases", leaseTests},
		{"Text", textTests},
		{"Quotas", quotaTests},
		{"FairAcquire", fairTests},
		{"Webhooks", webhookTests},
		{"Files", fileTests},
		{"AppChats", appChatTests},
		{"Agents", agentTests},
		{"OutputFormat", formatTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, name := range slices.Sorted(maps.Keys(g.tests)) {
				t.Run(name, func(t *testing.T) {
					t.Parallel() // each subtest has a store of its own
					g.tests[name](t, open)
				})
			}
		})
	}
}

var errBoom = errors.New("boom")

// inTx runs fn in a transaction and fails the test on error.
func inTx(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.InTx(t.Context(), fn); err != nil {
		t.Fatalf("InTx: %v", err)
	}
}

// txErr runs fn in a transaction and returns its error.
func txErr(t *testing.T, s store.Store, fn func(tx store.Tx) error) error {
	t.Helper()
	return s.InTx(t.Context(), fn)
}

// addOwner creates an owner.
func addOwner(t *testing.T, s store.Store, name string) {
	t.Helper()
	inTx(t, s, func(tx store.Tx) error {
		_, err := tx.CreateOwner(t.Context(), name)
		return err
	})
}

// addChat stores c (unless set: a random id, owner "alice", model "m",
// status waiting) and returns it as InsertChat left it.
func addChat(t *testing.T, s store.Store, c chat.Chat) chat.Chat {
	t.Helper()
	if c.ID == "" {
		c.ID = uuid.NewString()
	}
	if c.Owner == "" {
		c.Owner = "alice"
	}
	if c.Model == "" {
		c.Model = "m"
	}
	if c.Status == "" {
		c.Status = chat.Waiting
	}
	// A chat is created waiting or pending; any other status is reached
	// through the state table, as in life. A requires_action chat keeps the
	// deadline asked for (to the second: it is reckoned from the clock).
	inTx(t, s, func(tx store.Tx) error { return insertAs(t.Context(), tx, &c) })
	return c
}

// insertAs inserts c in its status: created pending, then brought to the
// status through the state table (pathFromPending) when a chat cannot be
// created in it.
func insertAs(ctx context.Context, tx store.Tx, c *chat.Chat) error {
	want, deadline := c.Status, c.ActionDeadline
	if !chat.CanTransition(chat.New, want) {
		c.Status = chat.Pending
	}
	if err := tx.InsertChat(ctx, c); err != nil {
		return err
	}
	for _, to := range pathFromPending[want] {
		tr := store.Transition{From: c.Status, To: to, LastError: c.LastError}
		if deadline != nil {
			tr.ActionTimeout = time.Until(*deadline)
		}
		next, err := tx.TransitionChat(ctx, c.ID, tr)
		if err != nil {
			return err
		}
		*c = next
	}
	return nil
}

// pathFromPending is how addChat brings a pending chat to each status a
// chat cannot be created in.
var pathFromPending = map[chat.Status][]chat.Status{
	chat.Running:        {chat.Running},
	chat.RequiresAction: {chat.Running, chat.RequiresAction},
	chat.Error:          {chat.Running, chat.Error},
}

// getChat reads a chat and fails the test on error.
func getChat(t *testing.T, s store.Reader, id string) chat.Chat {
	t.Helper()
	c, err := s.GetChat(t.Context(), id)
	if err != nil {
		t.Fatalf("GetChat(%s): %v", id, err)
	}
	return c
}

// now is the current time as the stores keep it.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// clockPast waits (for at most a few microseconds) until the clock, at the
// stores' precision, has passed ts, and returns that time: a write that
// "bumps" a time must then store one at or after it.
func clockPast(t *testing.T, ts time.Time) time.Time {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		n := now()
		if n.After(ts) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("clock does not pass %v", ts)
		}
	}
}

// wantErr fails the test unless errors.Is(err, target).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// wantEqual fails the test unless got and want are deeply equal.
func wantEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
