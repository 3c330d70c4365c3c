package storetest

import (
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
)

var quotaTests = map[string]func(*testing.T, opener){
	"LedgerFromTransition":      testLedgerFromTransition,
	"LedgerFromAddUsage":        testLedgerFromAddUsage,
	"LedgerRolledBack":          testLedgerRolledBack,
	"LedgerNothingForZeroUsage": testLedgerZeroUsage,
	"UsageSinceDay":             testUsageSinceDay,
	"OverridesRoundTrip":        testOverridesRoundTrip,
	"QuotasUnknownOwner":        testQuotasUnknownOwner,
	"CountChats":                testCountChats,
	"OwnerStats":                testOwnerStats,
}

// ownerUsage reads an owner's usage from since's day on and fails the test
// on error.
func ownerUsage(t *testing.T, s store.Reader, owner string, since time.Time) chat.Usage {
	t.Helper()
	u, err := s.OwnerUsage(t.Context(), owner, since)
	if err != nil {
		t.Fatalf("OwnerUsage(%s): %v", owner, err)
	}
	return u
}

// today is the start of the current UTC day.
func today() time.Time { return quota.Day.Start(time.Now()) }

func testLedgerFromTransition(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	c := addChat(t, s, chat.Chat{Status: chat.Pending})
	addChat(t, s, chat.Chat{Owner: "bob", Status: chat.Pending})
	mustTransition(t, s, c.ID, store.Transition{From: chat.Pending, To: chat.Running,
		AddUsage: chat.Usage{InputTokens: 10, OutputTokens: 5, CostMicros: 7}})
	got := mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Waiting,
		AddUsage: chat.Usage{InputTokens: 1, OutputTokens: 2, CostMicros: 3}})
	want := chat.Usage{InputTokens: 11, OutputTokens: 7, CostMicros: 10}
	wantEqual(t, "chat usage", got.Usage, want)
	wantEqual(t, "alice's usage today", ownerUsage(t, s, "alice", today()), want)
	wantEqual(t, "bob's usage today", ownerUsage(t, s, "bob", today()), chat.Usage{})
}

func testLedgerFromAddUsage(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	u := chat.Usage{InputTokens: 100, OutputTokens: 20, CostMicros: 3}
	inTx(t, s, func(tx store.Tx) error { return tx.AddUsage(t.Context(), c.ID, u) })
	inTx(t, s, func(tx store.Tx) error { return tx.AddUsage(t.Context(), c.ID, u) })
	wantEqual(t, "alice's usage today", ownerUsage(t, s, "alice", today()), u.Add(u))
	err := txErr(t, s, func(tx store.Tx) error { return tx.AddUsage(t.Context(), "nope", u) })
	wantErr(t, "AddUsage to an unknown chat", err, store.ErrNotFound)
	wantEqual(t, "alice's usage after the failed add", ownerUsage(t, s, "alice", today()), u.Add(u))
}

func testLedgerRolledBack(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Pending})
	u := chat.Usage{InputTokens: 4, OutputTokens: 5, CostMicros: 6}
	err := txErr(t, s, func(tx store.Tx) error {
		if _, err := tx.TransitionChat(t.Context(), c.ID, store.Transition{From: chat.Pending, To: chat.Running, AddUsage: u}); err != nil {
			return err
		}
		if err := tx.AddUsage(t.Context(), c.ID, u); err != nil {
			return err
		}
		return errBoom
	})
	wantErr(t, "InTx", err, errBoom)
	wantEqual(t, "usage after the rollback", ownerUsage(t, s, "alice", today()), chat.Usage{})
	wantEqual(t, "chat usage after the rollback", getChat(t, s, c.ID).Usage, chat.Usage{})
}

// testLedgerZeroUsage: a step without usage leaves no ledger row, so the
// owner, with nothing queued, is absent from OwnerStats.
func testLedgerZeroUsage(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Pending})
	mustTransition(t, s, c.ID, store.Transition{From: chat.Pending, To: chat.Running})
	mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Waiting})
	inTx(t, s, func(tx store.Tx) error { return tx.AddUsage(t.Context(), c.ID, chat.Usage{}) })
	stats, err := s.OwnerStats(t.Context(), today())
	if err != nil {
		t.Fatalf("OwnerStats: %v", err)
	}
	wantEqual(t, "owner stats", len(stats), 0)
}

func testUsageSinceDay(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	u := chat.Usage{InputTokens: 1, OutputTokens: 2, CostMicros: 3}
	inTx(t, s, func(tx store.Tx) error { return tx.AddUsage(t.Context(), c.ID, u) })
	// Any time of today's UTC day counts the whole day; later days nothing.
	endOfDay := quota.Day.End(time.Now()).Add(-time.Microsecond)
	for _, tc := range []struct {
		name  string
		since time.Time
		want  chat.Usage
	}{
		{"a month ago", time.Now().AddDate(0, -1, 0), u},
		{"today", today(), u},
		{"the end of today", endOfDay, u},
		{"the end of today, in another zone", endOfDay.In(time.FixedZone("east", 10*3600)), u},
		{"tomorrow", quota.Day.End(time.Now()), chat.Usage{}},
		{"next month", time.Now().AddDate(0, 1, 0), chat.Usage{}},
	} {
		wantEqual(t, "usage since "+tc.name, ownerUsage(t, s, "alice", tc.since), tc.want)
	}
	wantEqual(t, "usage of an owner without any", ownerUsage(t, s, "nobody", today()), chat.Usage{})
}

func testOverridesRoundTrip(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	get := func(owner string) quota.Overrides {
		t.Helper()
		o, err := s.OwnerQuotas(t.Context(), owner)
		if err != nil {
			t.Fatalf("OwnerQuotas(%s): %v", owner, err)
		}
		return o
	}
	setQuotas := func(owner string, o quota.Overrides) {
		t.Helper()
		inTx(t, s, func(tx store.Tx) error { return tx.SetOwnerQuotas(t.Context(), owner, o) })
	}
	wantEqual(t, "quotas never set", get("alice"), quota.Overrides{})

	// A field set to 0 (unlimited) stays set: it is not the default.
	all := quota.Overrides{
		SpendMicrosPerDay: ptr[int64](1), SpendMicrosPerMonth: ptr[int64](2), TokensPerDay: ptr[int64](3),
		TokensPerMonth: ptr[int64](4), RequestsPerSecond: ptr(2.5), Burst: ptr(6), MaxRunning: ptr(0),
		MaxStreams: ptr(7), MaxChats: ptr(8), MaxFileBytes: ptr[int64](9),
	}
	setQuotas("alice", all)
	wantEqual(t, "quotas set", get("alice"), all)
	wantEqual(t, "another owner's quotas", get("bob"), quota.Overrides{})

	// Setting replaces: the fields left out go back to the defaults.
	some := quota.Overrides{MaxRunning: ptr(3)}
	setQuotas("alice", some)
	wantEqual(t, "quotas replaced", get("alice"), some)
	setQuotas("alice", quota.Overrides{})
	wantEqual(t, "quotas cleared", get("alice"), quota.Overrides{})
}

func testQuotasUnknownOwner(t *testing.T, open opener) {
	s := open(t)
	_, err := s.OwnerQuotas(t.Context(), "nobody")
	wantErr(t, "OwnerQuotas of an unknown owner", err, store.ErrNotFound)
	err = txErr(t, s, func(tx store.Tx) error {
		return tx.SetOwnerQuotas(t.Context(), "nobody", quota.Overrides{MaxRunning: ptr(1)})
	})
	wantErr(t, "SetOwnerQuotas of an unknown owner", err, store.ErrNotFound)
}

func testCountChats(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	for _, st := range []chat.Status{chat.Waiting, chat.Pending, chat.Running, chat.Error} {
		addChat(t, s, chat.Chat{Status: st})
	}
	addChat(t, s, chat.Chat{Owner: "bob"})
	for owner, want := range map[string]int{"alice": 4, "bob": 1, "nobody": 0} {
		n, err := s.CountChats(t.Context(), owner)
		if err != nil {
			t.Fatalf("CountChats(%s): %v", owner, err)
		}
		wantEqual(t, "chats of "+owner, n, want)
	}
}

func testOwnerStats(t *testing.T, open opener) {
	s := open(t)
	for _, o := range []string{"alice", "bob", "carol", "dave"} {
		addOwner(t, s, o)
	}
	for _, st := range []chat.Status{chat.Pending, chat.Pending, chat.Running, chat.Waiting} {
		addChat(t, s, chat.Chat{Owner: "alice", Status: st})
	}
	bob := addChat(t, s, chat.Chat{Owner: "bob"}) // usage, nothing queued
	u := chat.Usage{InputTokens: 5, OutputTokens: 6, CostMicros: 7}
	inTx(t, s, func(tx store.Tx) error { return tx.AddUsage(t.Context(), bob.ID, u) })
	addChat(t, s, chat.Chat{Owner: "carol", Status: chat.RequiresAction}) // neither
	addChat(t, s, chat.Chat{Owner: "dave", Status: chat.Running})

	stats, err := s.OwnerStats(t.Context(), today())
	if err != nil {
		t.Fatalf("OwnerStats: %v", err)
	}
	wantEqual(t, "owner stats", stats, []store.OwnerStat{
		{Owner: "alice", Pending: 2, Running: 1},
		{Owner: "bob", Usage: u},
		{Owner: "dave", Running: 1},
	})
	stats, err = s.OwnerStats(t.Context(), quota.Day.End(time.Now()))
	if err != nil {
		t.Fatalf("OwnerStats: %v", err)
	}
	wantEqual(t, "owner stats from tomorrow", stats, []store.OwnerStat{
		{Owner: "alice", Pending: 2, Running: 1},
		{Owner: "dave", Running: 1},
	})
}
