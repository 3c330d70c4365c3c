package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// formatTests are what structured output keeps: a chat's response format,
// the format and repair count of its turn in progress, a queued message's
// format, and the completed event's turn.
var formatTests = map[string]func(*testing.T, opener){
	"ChatFormatRoundTrip":  testChatFormatRoundTrip,
	"StartTurn":            testStartTurn,
	"RepairsReset":         testRepairsReset,
	"QueuedFormat":         testQueuedFormat,
	"CompletedEventTurn":   testCompletedEventTurn,
	"StartTurnUnknownChat": testStartTurnUnknownChat,
}

// invoiceFormat is a response format for the tests.
func invoiceFormat() *chat.ResponseFormat {
	return &chat.ResponseFormat{Type: chat.FormatJSONSchema, JSONSchema: chat.OutputFormat{Name: "invoice", Strict: true,
		Schema: json.RawMessage(`{"type":"object","properties":{"total":{"type":"number"}},"required":["total"],"additionalProperties":false}`)}}
}

// wantFormat fails the test unless got is want, schema bytes compared as
// JSON values.
func wantFormat(t *testing.T, what string, got, want *chat.ResponseFormat) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
	if got == nil {
		return
	}
	var a, b any
	if err := json.Unmarshal(got.JSONSchema.Schema, &a); err != nil && len(got.JSONSchema.Schema) > 0 {
		t.Fatalf("%s schema: %v", what, err)
	}
	_ = json.Unmarshal(want.JSONSchema.Schema, &b)
	g, w := *got, *want
	g.JSONSchema.Schema, w.JSONSchema.Schema = nil, nil
	wantEqual(t, what, g, w)
	wantEqual(t, what+" schema", a, b)
}

func testChatFormatRoundTrip(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{ResponseFormat: invoiceFormat()})
	plain := addChat(t, s, chat.Chat{})
	got := getChat(t, s, c.ID)
	wantFormat(t, "response_format", got.ResponseFormat, invoiceFormat())
	if got.TurnFormat != nil || got.OutputRepairs != 0 {
		t.Fatalf("a new chat's turn = %+v, %d repairs; want none", got.TurnFormat, got.OutputRepairs)
	}
	if p := getChat(t, s, plain.ID); p.ResponseFormat != nil || p.TurnOutput() != nil {
		t.Fatalf("a chat without a format reads %+v", p.ResponseFormat)
	}
	page, err := s.ListChats(t.Context(), store.ChatQuery{Owner: "alice", Limit: 10})
	if err != nil || len(page.Chats) != 2 {
		t.Fatalf("ListChats = %+v, %v", page, err)
	}
	for _, l := range page.Chats {
		if l.ID == c.ID {
			wantFormat(t, "listed response_format", l.ResponseFormat, invoiceFormat())
		}
	}
	inTx(t, s, func(tx store.Tx) error {
		l, err := tx.LockChat(t.Context(), c.ID)
		wantFormat(t, "locked response_format", l.ResponseFormat, invoiceFormat())
		return err
	})
}

func testStartTurn(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{ResponseFormat: invoiceFormat(), Status: chat.Running})
	for range 2 {
		inTx(t, s, func(tx store.Tx) error { _, err := tx.AddOutputRepair(t.Context(), c.ID); return err })
	}
	if got := getChat(t, s, c.ID); got.OutputRepairs != 2 {
		t.Fatalf("OutputRepairs = %d after two, want 2", got.OutputRepairs)
	}
	text := &chat.ResponseFormat{Type: chat.FormatText}
	inTx(t, s, func(tx store.Tx) error { return tx.StartTurn(t.Context(), c.ID, text) })
	got := getChat(t, s, c.ID)
	wantFormat(t, "turn format", got.TurnFormat, text)
	if got.OutputRepairs != 0 || got.TurnOutput() != nil {
		t.Fatalf("after StartTurn(text): %d repairs, turn output %+v; want 0 and free text", got.OutputRepairs, got.TurnOutput())
	}
	wantFormat(t, "the chat's own format", got.ResponseFormat, invoiceFormat())
	inTx(t, s, func(tx store.Tx) error { return tx.StartTurn(t.Context(), c.ID, nil) })
	if got := getChat(t, s, c.ID); got.TurnFormat != nil || got.TurnOutput() == nil || got.TurnOutput().Name != "invoice" {
		t.Fatalf("after StartTurn(nil): turn %+v, output %+v; want the chat's", got.TurnFormat, got.TurnOutput())
	}
	// A rolled back StartTurn leaves nothing.
	err := txErr(t, s, func(tx store.Tx) error {
		if err := tx.StartTurn(t.Context(), c.ID, text); err != nil {
			return err
		}
		return errBoom
	})
	wantErr(t, "rolled back", err, errBoom)
	if got := getChat(t, s, c.ID); got.TurnFormat != nil {
		t.Fatalf("a rolled back StartTurn left %+v", got.TurnFormat)
	}
}

func testStartTurnUnknownChat(t *testing.T, open opener) {
	s := open(t)
	wantErr(t, "StartTurn", txErr(t, s, func(tx store.Tx) error { return tx.StartTurn(t.Context(), "missing", nil) }), store.ErrNotFound)
	wantErr(t, "AddOutputRepair", txErr(t, s, func(tx store.Tx) error {
		_, err := tx.AddOutputRepair(t.Context(), "missing")
		return err
	}), store.ErrNotFound)
}

// testRepairsReset: a run a person asks for (waiting or error to pending)
// starts the count over; the run's own changes, a lease recovery and an
// acquisition keep it.
func testRepairsReset(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Running})
	repair := func() int {
		var n int
		inTx(t, s, func(tx store.Tx) error {
			var err error
			n, err = tx.AddOutputRepair(t.Context(), c.ID)
			return err
		})
		return n
	}
	if n := repair(); n != 1 {
		t.Fatalf("AddOutputRepair = %d, want 1", n)
	}
	moveChat(t, s, c.ID, chat.Running, chat.Running)
	moveChat(t, s, c.ID, chat.Running, chat.Pending) // handed back
	if got := getChat(t, s, c.ID); got.OutputRepairs != 1 {
		t.Fatalf("after a hand back: %d repairs, want 1", got.OutputRepairs)
	}
	_, leases, err := s.AcquireChats(t.Context(), store.Acquire{WorkerID: "w", TTL: time.Millisecond, Max: 1})
	if err != nil || len(leases) != 1 {
		t.Fatalf("AcquireChats = %v, %v", leases, err)
	}
	time.Sleep(5 * time.Millisecond) // the lease's TTL, on the database's clock
	if ids, err := s.RecoverExpiredLeases(t.Context(), true); err != nil || len(ids) != 1 {
		t.Fatalf("RecoverExpiredLeases = %v, %v", ids, err)
	}
	if got := getChat(t, s, c.ID); got.OutputRepairs != 1 {
		t.Fatalf("after acquire and recovery: %d repairs, want 1", got.OutputRepairs)
	}
	moveChat(t, s, c.ID, chat.Pending, chat.Running)
	if n := repair(); n != 2 {
		t.Fatalf("AddOutputRepair = %d, want 2", n)
	}
	moveChat(t, s, c.ID, chat.Running, chat.Error)
	if got := getChat(t, s, c.ID); got.OutputRepairs != 2 {
		t.Fatalf("in error: %d repairs, want 2", got.OutputRepairs)
	}
	moveChat(t, s, c.ID, chat.Error, chat.Pending) // a retry
	if got := getChat(t, s, c.ID); got.OutputRepairs != 0 {
		t.Fatalf("after a retry: %d repairs, want 0", got.OutputRepairs)
	}
}

func testQueuedFormat(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Running})
	inTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertQueued(t.Context(), &chat.QueuedMessage{ChatID: c.ID, Parts: []chat.Part{chat.TextPart("a")},
			ResponseFormat: invoiceFormat()}); err != nil {
			return err
		}
		return tx.InsertQueued(t.Context(), &chat.QueuedMessage{ChatID: c.ID, Parts: []chat.Part{chat.TextPart("b")}})
	})
	q := listQueued(t, s, c.ID)
	if len(q) != 2 {
		t.Fatalf("queued = %+v", q)
	}
	wantFormat(t, "the first queued message's format", q[0].ResponseFormat, invoiceFormat())
	wantFormat(t, "the second's", q[1].ResponseFormat, nil)
}

// testCompletedEventTurn: a chat.completed event names the chat's newest
// message, so its body reads the output of the turn it completed.
func testCompletedEventTurn(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventCompleted)
	c := addChat(t, s, chat.Chat{Status: chat.Running})
	appendMessage(t, s, textMessage(c.ID, "total?"))
	answer := appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{
		chat.TextPart(`{"total":3}`), {Type: chat.PartOutput, JSON: json.RawMessage(`{"total":3}`)}}})
	moveChat(t, s, c.ID, chat.Running, chat.Waiting)
	evs, err := s.WebhookEvents(t.Context(), "alice")
	if err != nil || len(evs) != 1 || evs[0].Type != store.EventCompleted || evs[0].ThroughMessageID != answer.ID {
		t.Fatalf("events = %+v, %v; want chat.completed through %d", evs, err, answer.ID)
	}
	// A later turn is not the event's.
	appendMessage(t, s, textMessage(c.ID, "again"))
	turn, err := s.TurnThrough(t.Context(), c.ID, evs[0].ThroughMessageID)
	if err != nil || string(chat.LastOutput(turn)) != `{"total":3}` {
		t.Fatalf("TurnThrough = %+v, %v; want the answer with its output", turn, err)
	}
}
