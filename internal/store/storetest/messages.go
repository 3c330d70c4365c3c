package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var messageTests = map[string]func(*testing.T, opener){
	"InsertAndListRoundTrip":  testMessagesRoundTrip,
	"LastTurn":                testLastTurn,
	"IDsIncreaseAndAfter":     testMessageIDs,
	"Limit":                   testMessagesLimit,
	"UsageAddsToChat":         testMessageUsage,
	"UnknownChat":             testMessageUnknownChat,
	"ReservedID":              testReservedMessageID,
	"SinceCompactionOfChats":  testSinceCompaction,
	"SinceNewestCompaction":   testSinceNewestCompaction,
	"SinceCompactionLimit":    testSinceCompactionLimit,
	"CompactionReplaced":      testCompactionReplaced,
	"ListEveryMessage":        testListEveryMessage,
	"MessageVersions":         testMessageVersions,
	"SupersedeAfter":          testSupersedeAfter,
	"LastTurnSkipsSuperseded": testLastTurnSkipsSuperseded,
}

var queuedTests = map[string]func(*testing.T, opener){
	"ArrivalOrderAndDelete": testQueued,
	"UnknownChat":           testQueuedUnknownChat,
}

// listMessages lists a chat's messages and fails the test on error.
func listMessages(t *testing.T, s store.Reader, chatID string, after int64, limit int) []chat.Message {
	t.Helper()
	msgs, err := s.ListMessages(t.Context(), chatID, after, limit)
	if err != nil {
		t.Fatalf("ListMessages(%s, after %d, limit %d): %v", chatID, after, limit, err)
	}
	return msgs
}

// listQueued lists a chat's queued messages and fails the test on error.
func listQueued(t *testing.T, s store.Reader, chatID string) []chat.QueuedMessage {
	t.Helper()
	qs, err := s.ListQueued(t.Context(), chatID)
	if err != nil {
		t.Fatalf("ListQueued(%s): %v", chatID, err)
	}
	return qs
}

// appendMessage inserts m in a transaction of its own and returns it as
// InsertMessage left it.
func appendMessage(t *testing.T, s store.Store, m chat.Message) chat.Message {
	t.Helper()
	inTx(t, s, func(tx store.Tx) error { return tx.InsertMessage(t.Context(), &m) })
	return m
}

func textMessage(chatID, text string) chat.Message {
	return chat.Message{ChatID: chatID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart(text)}}
}

func testMessagesRoundTrip(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	before := now()
	in := []chat.Message{
		textMessage(c.ID, "What is the weather in Paris?"),
		{ChatID: c.ID, Role: chat.RoleAssistant, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 7, CostMicros: 11}, Parts: []chat.Part{
			{Type: chat.PartReasoning, Text: "The user wants weather."},
			{Type: chat.PartText, Text: "Let me look."},
			// Arguments keep their bytes, key order included.
			{Type: chat.PartToolCall, ToolCallID: "call_1", ToolName: "get_weather", Args: json.RawMessage(`{"z":1,"city":"Paris"}`)},
		}},
		{ChatID: c.ID, Role: chat.RoleTool, Parts: []chat.Part{
			{Type: chat.PartToolResult, ToolCallID: "call_1", ToolName: "get_weather", Output: json.RawMessage(`{"temp":21,"sky":"clear"}`)},
			{Type: chat.PartToolResult, ToolCallID: "call_2", ToolName: "x", Output: json.RawMessage(`"no result before deadline"`), IsError: true},
		}},
	}
	var want []chat.Message
	for _, m := range in {
		m = appendMessage(t, s, m)
		if m.ID == 0 || m.CreatedAt.Before(before) || m.CreatedAt.After(now()) || m.CreatedAt.Location() != time.UTC {
			t.Fatalf("InsertMessage set ID %d, CreatedAt %v", m.ID, m.CreatedAt)
		}
		want = append(want, m)
	}
	wantEqual(t, "ListMessages", listMessages(t, s, c.ID, 0, 0), want)
	inTx(t, s, func(tx store.Tx) error {
		got, err := tx.ListMessages(t.Context(), c.ID, 0, 0)
		wantEqual(t, "Tx.ListMessages", got, want)
		return err
	})
	if got := listMessages(t, s, "other-chat", 0, 0); got == nil || len(got) != 0 {
		t.Fatalf("messages of an unknown chat: %#v, want an empty slice", got)
	}
	// Parts are never null, even when none were given.
	empty := appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleAssistant})
	if got := listMessages(t, s, c.ID, want[2].ID, 0); len(got) != 1 || got[0].ID != empty.ID || got[0].Parts == nil || got[0].Usage != nil {
		t.Fatalf("message without parts came back as %+v", got)
	}
}

func testMessageIDs(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	a := addChat(t, s, chat.Chat{})
	b := addChat(t, s, chat.Chat{})
	var mine []int64
	for i := range 6 {
		// Interleave two chats and both ways of inserting (alone, several
		// in one transaction).
		chatID := a.ID
		if i%3 == 2 {
			chatID = b.ID
		}
		if i%2 == 0 {
			m := appendMessage(t, s, textMessage(chatID, "one"))
			if chatID == a.ID {
				mine = append(mine, m.ID)
			}
			continue
		}
		inTx(t, s, func(tx store.Tx) error {
			for range 2 {
				m := textMessage(chatID, "two")
				if err := tx.InsertMessage(t.Context(), &m); err != nil {
					return err
				}
				if chatID == a.ID {
					mine = append(mine, m.ID)
				}
			}
			return nil
		})
	}
	for i := 1; i < len(mine); i++ {
		if mine[i] <= mine[i-1] {
			t.Fatalf("ids do not increase: %v", mine)
		}
	}
	msgs := listMessages(t, s, a.ID, 0, 0)
	got := make([]int64, len(msgs))
	for i, m := range msgs {
		got[i] = m.ID
	}
	wantEqual(t, "listed ids", got, mine)
	for i, id := range mine {
		wantEqual(t, "after", idsOf(listMessages(t, s, a.ID, id, 0)), mine[i+1:])
	}
	wantEqual(t, "after 0, limit 2", idsOf(listMessages(t, s, a.ID, 0, 2)), mine[:2])
	wantEqual(t, "after 2nd, limit 2", idsOf(listMessages(t, s, a.ID, mine[1], 2)), mine[2:4])
}

func idsOf(msgs []chat.Message) []int64 {
	out := []int64{}
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}

func testMessagesLimit(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	inTx(t, s, func(tx store.Tx) error {
		for range store.MaxPageSize + 1 {
			m := textMessage(c.ID, "x")
			if err := tx.InsertMessage(t.Context(), &m); err != nil {
				return err
			}
		}
		return nil
	})
	for _, tc := range []struct{ limit, want int }{
		{1, 1}, {7, 7}, {0, 50}, {-1, 1}, {store.MaxPageSize, store.MaxPageSize}, {store.MaxPageSize + 1, store.MaxPageSize},
	} {
		if got := len(listMessages(t, s, c.ID, 0, tc.limit)); got != tc.want {
			t.Fatalf("limit %d: %d messages, want %d", tc.limit, got, tc.want)
		}
	}
}

// testMessageUsage: a message's usage is stored with it and leaves the
// chat's totals alone; AddUsage adds to them (and bumps UpdatedAt), and so
// does a status change's AddUsage; AddUsage on a missing chat is
// ErrNotFound.
func testMessageUsage(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Pending, Usage: chat.Usage{InputTokens: 1, OutputTokens: 2, CostMicros: 3}})
	inTx(t, s, func(tx store.Tx) error {
		for _, u := range []*chat.Usage{{InputTokens: 100}, nil, {OutputTokens: 200, CostMicros: 300}} {
			m := chat.Message{ChatID: c.ID, Role: chat.RoleAssistant, Usage: u}
			if err := tx.InsertMessage(t.Context(), &m); err != nil {
				return err
			}
		}
		return nil
	})
	wantEqual(t, "usage after inserts", getChat(t, s, c.ID).Usage, chat.Usage{InputTokens: 1, OutputTokens: 2, CostMicros: 3})
	msgs := listMessages(t, s, c.ID, 0, 0)
	if *msgs[0].Usage != (chat.Usage{InputTokens: 100}) || msgs[1].Usage != nil || *msgs[2].Usage != (chat.Usage{OutputTokens: 200, CostMicros: 300}) {
		t.Fatalf("message usage did not round-trip: %+v, %+v, %+v", msgs[0].Usage, msgs[1].Usage, msgs[2].Usage)
	}

	mark := clockPast(t, getChat(t, s, c.ID).UpdatedAt)
	inTx(t, s, func(tx store.Tx) error {
		return tx.AddUsage(t.Context(), c.ID, chat.Usage{InputTokens: 10, OutputTokens: 20, CostMicros: 30})
	})
	got := getChat(t, s, c.ID)
	wantEqual(t, "usage after AddUsage", got.Usage, chat.Usage{InputTokens: 11, OutputTokens: 22, CostMicros: 33})
	if got.UpdatedAt.Before(mark) {
		t.Fatalf("UpdatedAt = %v, not bumped past %v", got.UpdatedAt, mark)
	}

	_, l := acquire(t, s, "w1", longTTL)
	inTx(t, s, func(tx store.Tx) error {
		c, err := tx.TransitionChat(t.Context(), l.ChatID, store.Transition{From: chat.Running, To: chat.Waiting,
			AddUsage: chat.Usage{InputTokens: 100, OutputTokens: 200, CostMicros: 300}})
		wantEqual(t, "usage the status change returns", c.Usage, chat.Usage{InputTokens: 111, OutputTokens: 222, CostMicros: 333})
		return err
	})
	wantEqual(t, "usage after the status change", getChat(t, s, c.ID).Usage, chat.Usage{InputTokens: 111, OutputTokens: 222, CostMicros: 333})

	err := txErr(t, s, func(tx store.Tx) error { return tx.AddUsage(t.Context(), "missing", chat.Usage{InputTokens: 1}) })
	wantErr(t, "AddUsage to a missing chat", err, store.ErrNotFound)
}

func testMessageUnknownChat(t *testing.T, open opener) {
	s := open(t)
	ids, err := s.ReserveMessageIDs(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range []*chat.Usage{nil, {InputTokens: 1}} {
		for _, id := range []int64{0, ids[i]} { // a new id, and a reserved one
			err := txErr(t, s, func(tx store.Tx) error {
				m := chat.Message{ID: id, ChatID: "missing", Role: chat.RoleUser, Usage: u, Parts: []chat.Part{chat.TextPart("x")}}
				return tx.InsertMessage(t.Context(), &m)
			})
			wantErr(t, fmt.Sprintf("InsertMessage (id %d, usage %v) into a missing chat", id, u), err, store.ErrNotFound)
		}
	}
}

func testQueued(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	other := addChat(t, s, chat.Chat{})
	before := now()
	var want []chat.QueuedMessage
	for i, text := range []string{"first", "second", "third", "fourth"} {
		chatID := c.ID
		if i == 2 {
			chatID = other.ID
		}
		q := chat.QueuedMessage{ChatID: chatID, Parts: []chat.Part{chat.TextPart(text), {Type: chat.PartText, Text: "+"}}}
		inTx(t, s, func(tx store.Tx) error { return tx.InsertQueued(t.Context(), &q) })
		if q.ID == 0 || q.CreatedAt.Before(before) || q.CreatedAt.Location() != time.UTC {
			t.Fatalf("InsertQueued set ID %d, CreatedAt %v", q.ID, q.CreatedAt)
		}
		if chatID == c.ID {
			want = append(want, q)
		}
	}
	wantEqual(t, "ListQueued", listQueued(t, s, c.ID), want)

	inTx(t, s, func(tx store.Tx) error { return tx.DeleteQueued(t.Context(), want[1].ID) })
	wantEqual(t, "after DeleteQueued", listQueued(t, s, c.ID), []chat.QueuedMessage{want[0], want[2]})
	if len(listQueued(t, s, other.ID)) != 1 {
		t.Fatal("DeleteQueued touched another chat")
	}
	err := txErr(t, s, func(tx store.Tx) error { return tx.DeleteQueued(t.Context(), want[1].ID) })
	wantErr(t, "DeleteQueued twice", err, store.ErrNotFound)
	if got := listQueued(t, s, "missing"); got == nil || len(got) != 0 {
		t.Fatalf("queued messages of an unknown chat: %#v, want an empty slice", got)
	}
}

func testQueuedUnknownChat(t *testing.T, open opener) {
	s := open(t)
	err := txErr(t, s, func(tx store.Tx) error {
		return tx.InsertQueued(t.Context(), &chat.QueuedMessage{ChatID: "missing", Parts: []chat.Part{chat.TextPart("x")}})
	})
	wantErr(t, "InsertQueued into a missing chat", err, store.ErrNotFound)
}

// testReservedMessageID: an id reserved before other messages are inserted
// is taken by the message inserted with it, never by another, and later
// reservations are greater.
func testReservedMessageID(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	first := appendMessage(t, s, textMessage(c.ID, "before"))
	ids, err := s.ReserveMessageIDs(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[0] >= ids[1] || ids[1] >= ids[2] {
		t.Fatalf("reserved %v, want 3 increasing ids", ids)
	}
	id := ids[0]
	if _, err := s.ReserveMessageIDs(t.Context(), 0); err == nil {
		t.Fatal("reserving 0 ids must fail")
	}
	if id <= first.ID {
		t.Fatalf("reserved %d after message %d", id, first.ID)
	}
	other := addChat(t, s, chat.Chat{})
	between := appendMessage(t, s, textMessage(other.ID, "another chat meanwhile"))
	if between.ID <= ids[2] {
		t.Fatalf("a plain insert took id %d, within the reserved %v", between.ID, ids)
	}
	m := textMessage(c.ID, "reserved")
	m.ID = id
	m = appendMessage(t, s, m)
	wantEqual(t, "inserted id", m.ID, id)
	after := appendMessage(t, s, textMessage(c.ID, "after"))
	if after.ID <= id {
		t.Fatalf("message after the reserved one got id %d <= %d", after.ID, id)
	}
	more, err := s.ReserveMessageIDs(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if next := more[0]; next <= after.ID || next <= ids[2] {
		t.Fatalf("reservation %d not above %d", next, after.ID)
	}
	msgs := listMessages(t, s, c.ID, 0, 10)
	if len(msgs) != 3 || msgs[1].ID != id || msgs[1].Parts[0].Text != "reserved" {
		t.Fatalf("history %+v", msgs)
	}
}

// testSinceCompaction: without compactions, one call returns each asked
// chat's first messages, in id order and cut at the limit, the same
// messages ListMessages returns; chats without messages, unknown chats and
// chats not asked for are absent.
func testSinceCompaction(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	long, short, empty, other := addChat(t, s, chat.Chat{}), addChat(t, s, chat.Chat{}), addChat(t, s, chat.Chat{}), addChat(t, s, chat.Chat{})
	for i := range 5 {
		// Interleaved, so a chat's ids are not consecutive.
		appendMessage(t, s, textMessage(long.ID, fmt.Sprint("long ", i)))
		if i < 2 {
			appendMessage(t, s, textMessage(short.ID, fmt.Sprint("short ", i)))
		}
		appendMessage(t, s, textMessage(other.ID, fmt.Sprint("other ", i)))
	}
	got, err := s.SinceCompaction(t.Context(), []string{long.ID, short.ID, empty.ID, "unknown"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]chat.Message{
		long.ID:  listMessages(t, s, long.ID, 0, 3),
		short.ID: listMessages(t, s, short.ID, 0, 0),
	}
	wantEqual(t, "first messages", got, want)
	if len(want[long.ID]) != 3 || len(want[short.ID]) != 2 {
		t.Fatalf("listed %d and %d messages, want 3 and 2", len(want[long.ID]), len(want[short.ID]))
	}
	for _, bad := range []struct {
		ids   []string
		limit int
	}{{nil, 3}, {[]string{long.ID}, 0}, {[]string{long.ID}, store.MaxPageSize + 1}} {
		if _, err := s.SinceCompaction(t.Context(), bad.ids, bad.limit); err == nil {
			t.Errorf("SinceCompaction(%q, %d) succeeded", bad.ids, bad.limit)
		}
	}
}

// testLastTurn: LastTurn is the last assistant message and what follows it,
// the whole history without an assistant message, nothing for no history.
func testLastTurn(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	ids := func(msgs []chat.Message) []int64 {
		out := []int64{}
		for _, m := range msgs {
			out = append(out, m.ID)
		}
		return out
	}
	last := func() []int64 {
		t.Helper()
		msgs, err := s.LastTurn(t.Context(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return ids(msgs)
	}
	wantEqual(t, "last turn of an empty chat", last(), []int64{})
	u1 := appendMessage(t, s, textMessage(c.ID, "one"))
	u2 := appendMessage(t, s, textMessage(c.ID, "two"))
	wantEqual(t, "last turn without an answer", last(), []int64{u1.ID, u2.ID})
	appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("a")}})
	appendMessage(t, s, textMessage(c.ID, "three"))
	a2 := appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{
		{Type: chat.PartToolCall, ToolCallID: "c1", ToolName: "x", Args: []byte(`{}`)}}})
	r := appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleTool, Parts: []chat.Part{
		{Type: chat.PartToolResult, ToolCallID: "c1", ToolName: "x", Output: []byte(`1`)}}})
	u4 := appendMessage(t, s, textMessage(c.ID, "four"))
	wantEqual(t, "last turn", last(), []int64{a2.ID, r.ID, u4.ID})
	inTx(t, s, func(tx store.Tx) error {
		msgs, err := tx.LastTurn(t.Context(), c.ID)
		wantEqual(t, "last turn in a transaction", ids(msgs), []int64{a2.ID, r.ID, u4.ID})
		return err
	})
}
