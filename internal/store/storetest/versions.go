package storetest

import (
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// messageVersions reads the versions of a chat's message and fails the
// test on error.
func messageVersions(t *testing.T, s store.Reader, chatID string, id int64) []chat.Message {
	t.Helper()
	v, err := s.MessageVersions(t.Context(), chatID, id)
	if err != nil {
		t.Fatalf("versions of message %d: %v", id, err)
	}
	return v
}

// testMessageVersions: SupersedeAfter keeps, on each message it marks,
// the message it followed in the history, compactions aside; the
// versions of a message are the messages with its parent, superseded or
// not, in id order, also when the parent is itself superseded or there is
// none (the chat's first message); a compaction's only version is itself;
// an unknown message, or another chat's, is ErrNotFound.
func testMessageVersions(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c, other := addChat(t, s, chat.Chat{}), addChat(t, s, chat.Chat{})
	answer := func(text string) chat.Message {
		return appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart(text)}})
	}
	u1 := appendMessage(t, s, textMessage(c.ID, "u1"))
	a1 := answer("a1")
	u2 := appendMessage(t, s, textMessage(c.ID, "u2"))
	a2 := answer("a2")
	wantEqual(t, "a message never replaced", messageVersions(t, s, c.ID, a2.ID), []chat.Message{a2})

	// A regeneration: the answer to u2 goes, another follows u2.
	supersedeAfter(t, s, c.ID, u2.ID)
	a2b := answer("a2b")
	answers := append(superseded(u2.ID, a2), a2b)
	wantEqual(t, "a regenerated answer", messageVersions(t, s, c.ID, a2b.ID), answers)
	wantEqual(t, "the answer it replaced", messageVersions(t, s, c.ID, a2.ID), answers)
	wantEqual(t, "the question answered again", messageVersions(t, s, c.ID, u2.ID), []chat.Message{u2})

	// An edit of u2: it goes with what followed it; its new version
	// follows a1, and a compaction written before the answer to it is no
	// parent.
	supersedeAfter(t, s, c.ID, a1.ID)
	u2b := appendMessage(t, s, textMessage(c.ID, "u2b"))
	comp := appendMessage(t, s, compactionMessage(c.ID, u1.ID))
	a3 := answer("a3")
	questions := append(superseded(a1.ID, u2), u2b)
	wantEqual(t, "an edited message", messageVersions(t, s, c.ID, u2b.ID), questions)
	wantEqual(t, "its earlier version", messageVersions(t, s, c.ID, u2.ID), questions)
	answers[1] = superseded(u2.ID, a2b)[0]
	wantEqual(t, "the answers to the earlier version", messageVersions(t, s, c.ID, a2.ID), answers)
	wantEqual(t, "the answer after a compaction", messageVersions(t, s, c.ID, a3.ID), []chat.Message{a3})
	wantEqual(t, "a compaction", messageVersions(t, s, c.ID, comp.ID), []chat.Message{comp})

	// Regenerating past the compaction: the answer and the compaction go,
	// both after u2b.
	supersedeAfter(t, s, c.ID, u2b.ID)
	a3b := answer("a3b")
	wantEqual(t, "an answer after a superseded compaction", messageVersions(t, s, c.ID, a3b.ID),
		append(superseded(u2b.ID, a3), a3b))
	every := listEvery(t, s, c.ID, 0, 0)
	if got := every[len(every)-3]; got.ID != comp.ID || got.ParentID == nil || *got.ParentID != u2b.ID {
		t.Fatalf("the superseded compaction reads %+v, want parent %d", got, u2b.ID)
	}

	// The first message edited: its versions have no parent.
	first := appendMessage(t, s, textMessage(other.ID, "first"))
	supersedeAfter(t, s, other.ID, 0)
	again := appendMessage(t, s, textMessage(other.ID, "first, again"))
	wantEqual(t, "the first message edited", messageVersions(t, s, other.ID, again.ID), append(superseded(0, first), again))

	for _, tc := range []struct {
		what   string
		chatID string
		id     int64
	}{
		{"an unknown message", c.ID, again.ID + 1000},
		{"another chat's message", c.ID, again.ID},
		{"an unknown chat", "missing", u1.ID},
	} {
		_, err := s.MessageVersions(t.Context(), tc.chatID, tc.id)
		wantErr(t, "versions of "+tc.what, err, store.ErrNotFound)
	}
}
