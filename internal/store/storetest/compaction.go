package storetest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// The tests of compactions (SinceCompaction) and of superseded messages
// (SupersedeAfter, ListEveryMessage, and the reads that leave
// superseded messages out), registered in messageTests.

// compactionMessage is a compaction of chatID that summarises its messages
// up to through.
func compactionMessage(chatID string, through int64) chat.Message {
	return chat.Message{ChatID: chatID, Role: chat.RoleAssistant, Usage: &chat.Usage{InputTokens: 900, OutputTokens: 90},
		Parts: []chat.Part{{Type: chat.PartCompaction, Summary: fmt.Sprint("everything up to ", through),
			Source: chat.CompactAuto, TokensBefore: 1800, ContextWindow: 2000, ThroughMessageID: through}}}
}

// sinceCompaction calls SinceCompaction and fails the test on error.
func sinceCompaction(t *testing.T, s store.Reader, chatIDs []string, limit int) map[string][]chat.Message {
	t.Helper()
	got, err := s.SinceCompaction(t.Context(), chatIDs, limit)
	if err != nil {
		t.Fatalf("SinceCompaction(%q, %d): %v", chatIDs, limit, err)
	}
	return got
}

// supersedeAfter supersedes a chat's messages after an id in a transaction
// of its own and returns how many it marked.
func supersedeAfter(t *testing.T, s store.Store, chatID string, after int64) int {
	t.Helper()
	var n int
	inTx(t, s, func(tx store.Tx) error {
		var err error
		n, err = tx.SupersedeAfter(t.Context(), chatID, after)
		return err
	})
	return n
}

// listEvery lists a chat's messages, superseded ones included, and fails
// the test on error.
func listEvery(t *testing.T, s store.Reader, chatID string, after int64, limit int) []chat.Message {
	t.Helper()
	msgs, err := s.ListEveryMessage(t.Context(), chatID, after, limit)
	if err != nil {
		t.Fatalf("ListEveryMessage(%s, after %d, limit %d): %v", chatID, after, limit, err)
	}
	return msgs
}

// superseded returns copies of msgs marked superseded.
func superseded(parent int64, msgs ...chat.Message) []chat.Message {
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		m.Superseded = true
		m.ParentID = ptr(parent)
		parent = m.ID
		out[i] = m
	}
	return out
}

// testSinceNewestCompaction: a chat's view starts after the through of its
// newest compaction, that compaction's message among it (its part coming
// back whole); each chat of the batch has its own; a superseded compaction
// no longer counts, so the view falls back to the compaction before it, or
// to the whole history; superseded messages are left out.
func testSinceNewestCompaction(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c, other := addChat(t, s, chat.Chat{}), addChat(t, s, chat.Chat{})
	m1 := appendMessage(t, s, textMessage(c.ID, "one"))
	o1 := appendMessage(t, s, textMessage(other.ID, "other one"))
	m2 := appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("two")}})
	m3 := appendMessage(t, s, textMessage(c.ID, "three"))
	c1 := appendMessage(t, s, compactionMessage(c.ID, m2.ID))
	oc := appendMessage(t, s, compactionMessage(other.ID, o1.ID))
	m4 := appendMessage(t, s, textMessage(c.ID, "four"))
	m5 := appendMessage(t, s, textMessage(c.ID, "five"))
	// The newest compaction under a reserved id, as a worker inserts it.
	reserved, err := s.ReserveMessageIDs(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	c2 := compactionMessage(c.ID, m4.ID)
	c2.ID = reserved[0]
	c2 = appendMessage(t, s, c2)
	o2 := appendMessage(t, s, textMessage(other.ID, "other two"))
	m6 := appendMessage(t, s, textMessage(c.ID, "six"))
	ids := []string{c.ID, other.ID}

	wantEqual(t, "since the newest compaction", sinceCompaction(t, s, ids, store.MaxPageSize),
		map[string][]chat.Message{c.ID: {m5, c2, m6}, other.ID: {oc, o2}})
	inTx(t, s, func(tx store.Tx) error {
		wantEqual(t, "in a transaction", sinceCompaction(t, tx, ids, store.MaxPageSize)[c.ID], []chat.Message{m5, c2, m6})
		return nil
	})

	// The newest compaction superseded (an edit of m5): the one before it
	// counts again, and the messages after the edit are left out.
	if n := supersedeAfter(t, s, c.ID, m5.ID); n != 2 {
		t.Fatalf("superseded %d messages, want 2", n)
	}
	m7 := appendMessage(t, s, textMessage(c.ID, "seven"))
	wantEqual(t, "with the newest compaction superseded", sinceCompaction(t, s, ids, store.MaxPageSize),
		map[string][]chat.Message{c.ID: {m3, c1, m4, m5, m7}, other.ID: {oc, o2}})

	// Every compaction superseded: the whole history that is left.
	supersedeAfter(t, s, c.ID, m1.ID)
	wantEqual(t, "with every compaction superseded", sinceCompaction(t, s, ids, store.MaxPageSize),
		map[string][]chat.Message{c.ID: {m1}, other.ID: {oc, o2}})
	supersedeAfter(t, s, c.ID, 0)
	wantEqual(t, "with every message superseded", sinceCompaction(t, s, ids, store.MaxPageSize),
		map[string][]chat.Message{other.ID: {oc, o2}})
}

// testSinceCompactionLimit: the limit counts the messages after the
// compaction's through that are not superseded.
func testSinceCompactionLimit(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	appendMessage(t, s, textMessage(c.ID, "one"))
	m2 := appendMessage(t, s, textMessage(c.ID, "two"))
	m3 := appendMessage(t, s, textMessage(c.ID, "three"))
	comp := appendMessage(t, s, compactionMessage(c.ID, m2.ID))
	var after []chat.Message
	for i := range 5 {
		after = append(after, appendMessage(t, s, textMessage(c.ID, fmt.Sprint("after ", i))))
	}
	wantEqual(t, "limit 3", sinceCompaction(t, s, []string{c.ID}, 3)[c.ID], []chat.Message{m3, comp, after[0]})
	wantEqual(t, "limit 1", sinceCompaction(t, s, []string{c.ID}, 1)[c.ID], []chat.Message{m3})

	supersedeAfter(t, s, c.ID, comp.ID)
	y1 := appendMessage(t, s, textMessage(c.ID, "y1"))
	y2 := appendMessage(t, s, textMessage(c.ID, "y2"))
	wantEqual(t, "limit 4 past superseded messages", sinceCompaction(t, s, []string{c.ID}, 4)[c.ID], []chat.Message{m3, comp, y1, y2})
	wantEqual(t, "limit 3 past superseded messages", sinceCompaction(t, s, []string{c.ID}, 3)[c.ID], []chat.Message{m3, comp, y1})
}

// testCompactionReplaced: a message is a compaction by its parts (one
// compaction part and nothing else).
func testCompactionReplaced(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	m1 := appendMessage(t, s, textMessage(c.ID, "one"))
	m2 := appendMessage(t, s, textMessage(c.ID, "two"))
	// A compaction part beside another is no compaction.
	notOne := compactionMessage(c.ID, m1.ID)
	notOne.Parts = append(notOne.Parts, chat.TextPart("and more"))
	notOne = appendMessage(t, s, notOne)
	wantEqual(t, "with a compaction part among others", sinceCompaction(t, s, []string{c.ID}, 10)[c.ID], []chat.Message{m1, m2, notOne})

}

// testListEveryMessage: ListMessages leaves superseded messages out, its
// pages and limit counting only the others; ListEveryMessage lists them
// all, the superseded ones marked.
func testListEveryMessage(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	var m []chat.Message
	for i := range 5 {
		m = append(m, appendMessage(t, s, textMessage(c.ID, fmt.Sprint("m", i))))
	}
	supersedeAfter(t, s, c.ID, m[1].ID)
	m = append(m, appendMessage(t, s, textMessage(c.ID, "m5")), appendMessage(t, s, textMessage(c.ID, "m6")))
	old := superseded(m[1].ID, m[2:5]...)

	wantEqual(t, "ListMessages", listMessages(t, s, c.ID, 0, 0), []chat.Message{m[0], m[1], m[5], m[6]})
	wantEqual(t, "ListMessages, first page", listMessages(t, s, c.ID, 0, 2), []chat.Message{m[0], m[1]})
	wantEqual(t, "ListMessages, second page", listMessages(t, s, c.ID, m[1].ID, 2), []chat.Message{m[5], m[6]})
	wantEqual(t, "ListMessages after a superseded id", listMessages(t, s, c.ID, m[3].ID, 1), []chat.Message{m[5]})

	every := append(append([]chat.Message{m[0], m[1]}, old...), m[5], m[6])
	wantEqual(t, "ListEveryMessage", listEvery(t, s, c.ID, 0, 0), every)
	wantEqual(t, "ListEveryMessage, a page", listEvery(t, s, c.ID, m[1].ID, 2), old[:2])
	wantEqual(t, "ListEveryMessage after a superseded id", listEvery(t, s, c.ID, m[3].ID, 0), []chat.Message{old[2], m[5], m[6]})
	inTx(t, s, func(tx store.Tx) error {
		wantEqual(t, "Tx.ListEveryMessage", listEvery(t, tx, c.ID, 0, 0), every)
		return nil
	})
	if got := listEvery(t, s, "missing", 0, 0); got == nil || len(got) != 0 {
		t.Fatalf("every message of an unknown chat: %#v, want an empty slice", got)
	}
	b, err := json.Marshal(listEvery(t, s, c.ID, m[1].ID, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || string(fields["superseded"]) != "true" {
		t.Fatalf("a superseded message in JSON: %s (%v), want \"superseded\": true", b, err)
	}
}

// testSupersedeAfter: SupersedeAfter marks the chat's messages after an id
// and counts those it marked (none twice), leaves other chats alone, is
// seen by the rest of its transaction and undone with it.
func testSupersedeAfter(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c, other := addChat(t, s, chat.Chat{}), addChat(t, s, chat.Chat{})
	var m []chat.Message
	for i := range 4 {
		m = append(m, appendMessage(t, s, textMessage(c.ID, fmt.Sprint("m", i))))
	}
	o1 := appendMessage(t, s, textMessage(other.ID, "elsewhere"))
	all := listEvery(t, s, c.ID, 0, 0)

	err := txErr(t, s, func(tx store.Tx) error {
		n, err := tx.SupersedeAfter(t.Context(), c.ID, m[0].ID)
		if err != nil {
			return err
		}
		if n != 3 {
			t.Errorf("superseded %d messages, want 3", n)
		}
		wantEqual(t, "in the transaction", listMessages(t, tx, c.ID, 0, 0), []chat.Message{m[0]})
		return errBoom
	})
	wantErr(t, "a failed transaction", err, errBoom)
	wantEqual(t, "after a failed transaction", listEvery(t, s, c.ID, 0, 0), all)

	if n := supersedeAfter(t, s, c.ID, m[1].ID); n != 2 {
		t.Fatalf("superseded %d messages after the second, want 2", n)
	}
	want := append([]chat.Message{m[0], m[1]}, superseded(m[1].ID, m[2], m[3])...)
	wantEqual(t, "after SupersedeAfter", listEvery(t, s, c.ID, 0, 0), want)
	wantEqual(t, "the other chat", listEvery(t, s, other.ID, 0, 0), []chat.Message{o1})
	for _, tc := range []struct {
		what   string
		chatID string
		after  int64
	}{
		{"again", c.ID, m[1].ID},
		{"after the last", c.ID, m[3].ID},
		{"an unknown chat", "missing", 0},
	} {
		if n := supersedeAfter(t, s, tc.chatID, tc.after); n != 0 {
			t.Fatalf("SupersedeAfter %s marked %d messages, want 0", tc.what, n)
		}
	}
	if n := supersedeAfter(t, s, c.ID, 0); n != 2 {
		t.Fatalf("superseded %d messages after 0, want the 2 left", n)
	}
	wantEqual(t, "after superseding all", listEvery(t, s, c.ID, 0, 0), superseded(0, m...))
	wantEqual(t, "the other chat at the end", listMessages(t, s, other.ID, 0, 0), []chat.Message{o1})
}

// testLastTurnSkipsSuperseded: LastTurn starts at the last assistant
// message that is not superseded and leaves superseded messages out.
func testLastTurnSkipsSuperseded(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	last := func() []int64 {
		t.Helper()
		msgs, err := s.LastTurn(t.Context(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return idsOf(msgs)
	}
	appendMessage(t, s, textMessage(c.ID, "one"))
	a1 := appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("a")}})
	u2 := appendMessage(t, s, textMessage(c.ID, "two"))
	a2 := appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{
		{Type: chat.PartToolCall, ToolCallID: "c1", ToolName: "x", Args: []byte(`{}`)}}})
	r := appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleTool, Parts: []chat.Part{
		{Type: chat.PartToolResult, ToolCallID: "c1", ToolName: "x", Output: []byte(`1`)}}})
	u3 := appendMessage(t, s, textMessage(c.ID, "three"))
	wantEqual(t, "last turn", last(), []int64{a2.ID, r.ID, u3.ID})

	supersedeAfter(t, s, c.ID, u2.ID) // an edit of "two"
	wantEqual(t, "last turn after an edit", last(), []int64{a1.ID, u2.ID})
	again := appendMessage(t, s, textMessage(c.ID, "three again"))
	wantEqual(t, "last turn with a new message", last(), []int64{a1.ID, u2.ID, again.ID})
	inTx(t, s, func(tx store.Tx) error {
		msgs, err := tx.LastTurn(t.Context(), c.ID)
		wantEqual(t, "last turn in a transaction", idsOf(msgs), []int64{a1.ID, u2.ID, again.ID})
		return err
	})
	supersedeAfter(t, s, c.ID, 0)
	wantEqual(t, "last turn with every message superseded", last(), []int64{})
}
