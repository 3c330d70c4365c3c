package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var transitionTests = map[string]func(*testing.T, opener){
	"EveryPair":             testEveryPair,
	"StatusConflict":        testStatusConflict,
	"Missing":               testTransitionMissing,
	"LastErrorColumn":       testLastErrorColumn,
	"ActionDeadlineColumn":  testActionDeadlineColumn,
	"TxNowIsDeadlinesClock": testTxNow,
	"BumpsUpdatedAt":        testTransitionBumpsUpdatedAt,
	"VersionGrows":          testVersionGrows,
	"ReturnsChatAfter":      testTransitionReturnsChat,
	"IllegalBeforeConflict": testIllegalBeforeConflict,
	"CompactRequested":      testCompactRequested,
}

// testEveryPair walks every pair of statuses: a legal change happens, an
// illegal one is refused with IllegalTransitionError and changes nothing.
func testEveryPair(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	for _, from := range chat.Statuses {
		for _, to := range chat.Statuses {
			c := addChat(t, s, chat.Chat{Status: from})
			var got chat.Chat
			err := txErr(t, s, func(tx store.Tx) error {
				var err error
				got, err = tx.TransitionChat(t.Context(), c.ID, store.Transition{From: from, To: to})
				return err
			})
			if chat.CanTransition(from, to) {
				if err != nil {
					t.Fatalf("%s -> %s: %v", from, to, err)
				}
				if got.Status != to || getChat(t, s, c.ID).Status != to {
					t.Fatalf("%s -> %s: status %s after the change", from, to, got.Status)
				}
				continue
			}
			var ill *store.IllegalTransitionError
			if !errors.As(err, &ill) || ill.From != from || ill.To != to {
				t.Fatalf("%s -> %s: got %v, want IllegalTransitionError", from, to, err)
			}
			if st := getChat(t, s, c.ID).Status; st != from {
				t.Fatalf("%s -> %s refused, yet status is now %s", from, to, st)
			}
		}
	}
}

// transition changes a chat's status in a transaction of its own.
func transition(t *testing.T, s store.Store, id string, tr store.Transition) (chat.Chat, error) {
	t.Helper()
	var c chat.Chat
	err := txErr(t, s, func(tx store.Tx) error {
		var err error
		c, err = tx.TransitionChat(t.Context(), id, tr)
		return err
	})
	return c, err
}

// mustTransition is transition that fails the test on error.
func mustTransition(t *testing.T, s store.Store, id string, tr store.Transition) chat.Chat {
	t.Helper()
	c, err := transition(t, s, id, tr)
	if err != nil {
		t.Fatalf("TransitionChat %s -> %s: %v", tr.From, tr.To, err)
	}
	return c
}

func testStatusConflict(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Waiting})
	_, err := transition(t, s, c.ID, store.Transition{From: chat.Pending, To: chat.Running})
	var sc *store.StatusConflictError
	if !errors.As(err, &sc) || sc.Status != chat.Waiting || sc.ChatID != c.ID {
		t.Fatalf("got %v, want StatusConflictError{%s, waiting}", err, c.ID)
	}
	wantEqual(t, "chat after a conflict", getChat(t, s, c.ID), c)
}

func testTransitionMissing(t *testing.T, open opener) {
	s := open(t)
	_, err := transition(t, s, "missing", store.Transition{From: chat.Waiting, To: chat.Pending})
	wantErr(t, "TransitionChat missing", err, store.ErrNotFound)
}

// testIllegalBeforeConflict: an illegal change is refused as such even when
// the chat is in another status, or does not exist.
func testIllegalBeforeConflict(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Running})
	for _, id := range []string{c.ID, "missing"} {
		_, err := transition(t, s, id, store.Transition{From: chat.Waiting, To: chat.Error})
		var ill *store.IllegalTransitionError
		if !errors.As(err, &ill) {
			t.Fatalf("chat %s: got %v, want IllegalTransitionError", id, err)
		}
	}
}

func testLastErrorColumn(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Running})
	cerr := &chat.ChatError{Kind: "source", Message: "lua: boom", Source: "weather", Retryable: false}

	// Only a change to error writes it.
	got := mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Running, LastError: cerr})
	if got.LastError != nil {
		t.Fatalf("running -> running wrote last_error %+v", got.LastError)
	}
	got = mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Error, LastError: cerr})
	wantEqual(t, "last_error after -> error", got.LastError, cerr)
	wantEqual(t, "stored last_error", getChat(t, s, c.ID).LastError, cerr)

	// Any other status clears it.
	got = mustTransition(t, s, c.ID, store.Transition{From: chat.Error, To: chat.Pending, LastError: cerr})
	if got.LastError != nil || getChat(t, s, c.ID).LastError != nil {
		t.Fatalf("error -> pending kept last_error %+v", got.LastError)
	}
}

// testActionDeadlineColumn: a change to requires_action sets the deadline
// to the database's clock plus ActionTimeout; any other change clears it.
func testActionDeadlineColumn(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Running})
	const timeout = 90 * time.Minute

	got := mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Running, ActionTimeout: timeout})
	if got.ActionDeadline != nil {
		t.Fatalf("running -> running wrote action_deadline %v", got.ActionDeadline)
	}
	before := now()
	got = mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.RequiresAction, ActionTimeout: timeout})
	after := now()
	// The database runs on this machine: its clock is this one's.
	if d := got.ActionDeadline; d == nil || d.Before(before.Add(timeout-time.Second)) || d.After(after.Add(timeout+time.Second)) {
		t.Fatalf("action_deadline %v, want about %v", d, before.Add(timeout))
	}
	wantEqual(t, "stored action_deadline", getChat(t, s, c.ID).ActionDeadline, got.ActionDeadline)

	got = mustTransition(t, s, c.ID, store.Transition{From: chat.RequiresAction, To: chat.Pending, ActionTimeout: timeout})
	if got.ActionDeadline != nil || getChat(t, s, c.ID).ActionDeadline != nil {
		t.Fatalf("requires_action -> pending kept action_deadline %v", got.ActionDeadline)
	}
}

// testTxNow: Tx.Now is the clock deadlines are set and expire by. A
// deadline set with no timeout has passed by Now in a later transaction, a
// chat's deadline has passed by Now exactly when ExpiredActions lists it,
// and Now is this machine's time, in UTC to the microsecond.
func testTxNow(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addDeadlines(t, s)
	c := addChat(t, s, chat.Chat{ID: "due-now", Status: chat.Running})
	mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.RequiresAction})
	before := now()
	inTx(t, s, func(tx store.Tx) error {
		n, err := tx.Now(t.Context())
		if err != nil {
			return err
		}
		if n.Location() != time.UTC || !n.Equal(n.Truncate(time.Microsecond)) {
			t.Errorf("Now = %v, want UTC to the microsecond", n)
		}
		// The database runs on this machine: its clock is this one's.
		if n.Before(before.Add(-clockSlack)) || n.After(now().Add(clockSlack)) {
			t.Errorf("Now = %v, want about %v", n, before)
		}
		es, err := tx.ExpiredActions(t.Context(), 100)
		if err != nil {
			return err
		}
		listed := map[string]bool{}
		for _, e := range es {
			listed[e.ChatID] = true
		}
		var passed []string
		for _, id := range []string{"z-first", "a-due", "b-due", "later", "due-now"} {
			d := getChat(t, tx, id).ActionDeadline
			if p := !d.After(n); p != listed[id] {
				t.Errorf("%s: deadline %v passed by Now %v: %v; listed by ExpiredActions: %v", id, d, n, p, listed[id])
			} else if p {
				passed = append(passed, id)
			}
		}
		wantEqual(t, "deadlines passed by Now", passed, []string{"z-first", "a-due", "b-due", "due-now"})
		return nil
	})
}

func testTransitionBumpsUpdatedAt(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Waiting})
	mark := clockPast(t, c.UpdatedAt)
	got := mustTransition(t, s, c.ID, store.Transition{From: chat.Waiting, To: chat.Pending})
	if got.UpdatedAt.Before(mark) || !getChat(t, s, c.ID).UpdatedAt.Equal(got.UpdatedAt) {
		t.Fatalf("UpdatedAt = %v, not bumped past %v", got.UpdatedAt, mark)
	}
	if !got.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("CreatedAt changed: %v -> %v", c.CreatedAt, got.CreatedAt)
	}
}

func testTransitionReturnsChat(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	full := fullChat()
	full.Status = chat.Running
	c := addChat(t, s, full)
	got := mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Waiting})
	want := stored(c)
	want.Status, want.LastError, want.ActionDeadline, want.UpdatedAt = chat.Waiting, nil, nil, got.UpdatedAt
	want.Version++
	want.WorkerID, want.LeaseExpiresAt = "", nil // leaving running ends the lease
	wantEqual(t, "returned chat", got, want)
	wantEqual(t, "stored chat", getChat(t, s, c.ID), want)
}

// testVersionGrows: a new chat is version 1, and every change that moves
// UpdatedAt (meta, usage, status changes, acquisition, recovery) adds one;
// renewing a lease changes nothing a client sees, nor the version.
func testVersionGrows(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Waiting})
	want := func(what string, got, v int64) {
		t.Helper()
		if got != v {
			t.Fatalf("version after %s = %d, want %d", what, got, v)
		}
		if stored := getChat(t, s, c.ID).Version; stored != v {
			t.Fatalf("stored version after %s = %d, want %d", what, stored, v)
		}
	}
	want("insert", c.Version, 1)
	c.Title = "renamed"
	inTx(t, s, func(tx store.Tx) error { return tx.UpdateChatMeta(t.Context(), &c) })
	want("a meta update", c.Version, 2)
	inTx(t, s, func(tx store.Tx) error { return tx.AddUsage(t.Context(), c.ID, chat.Usage{InputTokens: 1}) })
	want("adding usage", getChat(t, s, c.ID).Version, 3)
	want("a status change", mustTransition(t, s, c.ID, store.Transition{From: chat.Waiting, To: chat.Pending}).Version, 4)
	got, l := acquire(t, s, "w1", time.Millisecond)
	want("acquisition", got.Version, 5)
	if _, err := s.RenewLease(t.Context(), l, longTTL); err != nil {
		t.Fatalf("renew: %v", err)
	}
	want("a renewal", getChat(t, s, c.ID).Version, 5)
	mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Pending})
	_, l = acquire(t, s, "w1", time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for getChat(t, s, c.ID).Status == chat.Running {
		if time.Now().After(deadline) {
			t.Fatal("lease not recovered after 10s")
		}
		if _, err := s.RecoverExpiredLeases(t.Context(), true); err != nil {
			t.Fatalf("recover: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	want("recovery", getChat(t, s, c.ID).Version, 8)
}

// testCompactRequested: a transition to pending with Compact asks for a
// compaction, which every read of the chat shows; acquiring the chat and
// recovering its lease keep the request, and any transition without
// Compact clears it. InsertChat stores it as given.
func testCompactRequested(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Waiting})
	check := func(what string, got chat.Chat, want bool) {
		t.Helper()
		if got.CompactRequested != want {
			t.Fatalf("CompactRequested %s = %v, want %v", what, got.CompactRequested, want)
		}
	}
	check("of a new chat", c, false)
	check("the transition returns", mustTransition(t, s, c.ID, store.Transition{From: chat.Waiting, To: chat.Pending, Compact: true}), true)
	check("after the transition", getChat(t, s, c.ID), true)
	inTx(t, s, func(tx store.Tx) error {
		locked, err := tx.LockChat(t.Context(), c.ID)
		check("LockChat", locked, true)
		return err
	})
	page, err := s.ListChats(t.Context(), store.ChatQuery{Owner: "alice"})
	if err != nil || len(page.Chats) != 1 {
		t.Fatalf("ListChats: %+v, %v", page, err)
	}
	check("ListChats", page.Chats[0], true)

	running, _ := acquire(t, s, "w1", time.Millisecond)
	check("AcquireChats", running, true)
	deadline := time.Now().Add(10 * time.Second)
	for getChat(t, s, c.ID).Status == chat.Running {
		if time.Now().After(deadline) {
			t.Fatal("lease not recovered after 10s")
		}
		if _, err := s.RecoverExpiredLeases(t.Context(), true); err != nil {
			t.Fatalf("recover: %v", err)
		}
	}
	check("after recovery", getChat(t, s, c.ID), true)
	running, _ = acquire(t, s, "w2", longTTL)
	check("acquired again", running, true)
	check("running -> waiting returns", mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Waiting}), false)
	check("after running -> waiting", getChat(t, s, c.ID), false)

	// InsertChat stores the request; a transition without Compact clears it.
	asked := addChat(t, s, chat.Chat{Status: chat.Pending, CompactRequested: true})
	check("inserted", getChat(t, s, asked.ID), true)
	check("pending -> waiting returns", mustTransition(t, s, asked.ID, store.Transition{From: chat.Pending, To: chat.Waiting}), false)
	check("after pending -> waiting", getChat(t, s, asked.ID), false)
}
