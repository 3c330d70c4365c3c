package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
)

var fairTests = map[string]func(*testing.T, opener){
	"OwnerWithFewestRunningFirst": testFairFewestRunningFirst,
	"RankCountsTakenChats":        testFairRankCountsTaken,
	"MaxRunningDefault":           testMaxRunningDefault,
	"MaxRunningOverride":          testMaxRunningOverride,
}

// addPending stores n pending chats of owner, with ids prefix-000 on,
// oldest first, in one transaction, and returns their ids. The clock then
// passes the last one's updated_at, so chats stored afterwards are younger.
func addPending(t *testing.T, s store.Store, owner, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	var last time.Time
	inTx(t, s, func(tx store.Tx) error {
		for i := range ids {
			c := chat.Chat{ID: fmt.Sprintf("%s-%03d", prefix, i), Owner: owner, Model: "m", Status: chat.Pending}
			if err := tx.InsertChat(t.Context(), &c); err != nil {
				return err
			}
			ids[i], last = c.ID, c.UpdatedAt
		}
		return nil
	})
	clockPast(t, last)
	return ids
}

// acquireIDs runs AcquireChats and returns the ids it took, sorted.
func acquireIDs(t *testing.T, s store.Store, a store.Acquire) []string {
	t.Helper()
	if a.WorkerID == "" {
		a.WorkerID = "w"
	}
	if a.TTL == 0 {
		a.TTL = longTTL
	}
	cs, _, err := s.AcquireChats(t.Context(), a)
	if err != nil {
		t.Fatalf("AcquireChats(%+v): %v", a, err)
	}
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	slices.Sort(ids)
	return ids
}

// endRun moves a running chat to waiting, as a finished run does.
func endRun(t *testing.T, s store.Store, id string) {
	t.Helper()
	mustTransition(t, s, id, store.Transition{From: chat.Running, To: chat.Waiting})
}

// testFairFewestRunningFirst: one owner's long queue of older chats does
// not keep another owner's chat waiting.
func testFairFewestRunningFirst(t *testing.T, open opener) {
	t.Run("both idle", func(t *testing.T) {
		s := open(t)
		addOwner(t, s, "a")
		addOwner(t, s, "b")
		as := addPending(t, s, "a", "a", 300)
		bs := addPending(t, s, "b", "b", 1)
		wantEqual(t, "first acquisition of 2", acquireIDs(t, s, store.Acquire{Max: 2}), []string{as[0], bs[0]})
		wantEqual(t, "next acquisition of 2", acquireIDs(t, s, store.Acquire{Max: 2}), []string{as[1], as[2]})
	})
	t.Run("one running", func(t *testing.T) {
		s := open(t)
		addOwner(t, s, "a")
		addOwner(t, s, "b")
		as := addPending(t, s, "a", "a", 300)
		bs := addPending(t, s, "b", "b", 1)
		mustTransition(t, s, as[0], store.Transition{From: chat.Pending, To: chat.Running})
		wantEqual(t, "acquisition of 1", acquireIDs(t, s, store.Acquire{Max: 1}), bs)
		wantEqual(t, "next acquisition of 1", acquireIDs(t, s, store.Acquire{Max: 1}), as[1:2])
	})
}

// testFairRankCountsTaken: a chat's rank is its owner's running count plus
// its place in the owner's queue, ties going to the older chat.
func testFairRankCountsTaken(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "a")
	addOwner(t, s, "b")
	bs := addPending(t, s, "b", "b", 5) // older than a's
	as := addPending(t, s, "a", "a", 5)
	for _, id := range bs[:2] {
		mustTransition(t, s, id, store.Transition{From: chat.Pending, To: chat.Running})
	}
	// a's ranks: 1, 2, 3, ...; b's: 3, 4, ...; the tie at 3 goes to b's
	// older chat.
	wantEqual(t, "acquisition of 3", acquireIDs(t, s, store.Acquire{Max: 3}), []string{as[0], as[1], bs[2]})
	// Now a has 2 running and b 3: a's ranks 3, 4, ...; b's 4, ...
	wantEqual(t, "acquisition of 2", acquireIDs(t, s, store.Acquire{Max: 2}), []string{as[2], bs[3]})
}

func testMaxRunningDefault(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "a")
	addOwner(t, s, "b")
	as := addPending(t, s, "a", "a", 5)
	bs := addPending(t, s, "b", "b", 1)
	mustTransition(t, s, bs[0], store.Transition{From: chat.Pending, To: chat.Running})
	bs = append(bs, addPending(t, s, "b", "b2", 2)...)
	a := store.Acquire{Max: 10, MaxRunning: 2}
	wantEqual(t, "acquisition under a cap of 2", acquireIDs(t, s, a), []string{as[0], as[1], bs[1]})
	wantEqual(t, "acquisition with every owner at its cap", acquireIDs(t, s, a), []string{})
	for _, id := range as[2:] {
		wantEqual(t, "chat beyond the cap", getChat(t, s, id).Status, chat.Pending)
	}
	endRun(t, s, as[0])
	wantEqual(t, "acquisition after a run ended", acquireIDs(t, s, a), []string{as[2]})
	wantEqual(t, "acquisition without a cap", acquireIDs(t, s, store.Acquire{Max: 10}), []string{as[3], as[4], bs[2]})
}

func testMaxRunningOverride(t *testing.T, open opener) {
	s := open(t)
	for _, o := range []string{"raised", "unlimited", "lowered", "other"} {
		addOwner(t, s, o)
	}
	quotas := map[string]quota.Overrides{
		"raised":    {MaxRunning: ptr(3)},
		"unlimited": {MaxRunning: ptr(0), TokensPerDay: ptr[int64](5)},
		"lowered":   {MaxRunning: ptr(1)},
		"other":     {TokensPerDay: ptr[int64](5)}, // max_running not overridden
	}
	ids := map[string][]string{}
	for o, q := range quotas {
		inTx(t, s, func(tx store.Tx) error { return tx.SetOwnerQuotas(t.Context(), o, q) })
		ids[o] = addPending(t, s, o, o, 5)
	}
	want := slices.Concat(ids["raised"][:3], ids["unlimited"], ids["lowered"][:1], ids["other"][:2])
	slices.Sort(want)
	wantEqual(t, "acquisition", acquireIDs(t, s, store.Acquire{Max: 100, MaxRunning: 2}), want)
	wantEqual(t, "acquisition with every owner at its cap", acquireIDs(t, s, store.Acquire{Max: 100, MaxRunning: 2}), []string{})
}
