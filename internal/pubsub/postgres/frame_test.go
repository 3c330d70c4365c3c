package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/pubsub"
)

func testInstance() *PubSub {
	origin := rand.Text()
	return &PubSub{origin: origin, ownPrefix: framePrefix(origin)}
}

// TestOwnNotificationsStartWithOwnPrefix: the listener skips a notification
// by its first bytes, so every notification this instance sends, whatever
// its topics and payloads, must start with its prefix, and another
// instance's must not.
func TestOwnNotificationsStartWithOwnPrefix(t *testing.T) {
	p, other := testInstance(), testInstance()
	msgs := []pubsub.Message{{Topic: `chat."odd" topic`}, {Topic: "a", Payload: []byte(`{"o":"x"}`)}, {Topic: "b", Payload: []byte(`"quoted" \ and unicode é`)}}
	notes, err := p.notes(t.Context(), msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range notes {
		if !strings.HasPrefix(n, p.ownPrefix) {
			t.Errorf("notification %q does not start with its own prefix %q", n, p.ownPrefix)
		}
		if strings.HasPrefix(n, other.ownPrefix) {
			t.Errorf("notification %q starts with another instance's prefix", n)
		}
	}
}

// TestNotesPackMessagesInOrder: a publication's messages share as few
// notifications as fit under the limit, each one valid and under it, in
// order; a payload too large for any is stored and referred to.
func TestNotesPackMessagesInOrder(t *testing.T) {
	p := testInstance()
	var msgs []pubsub.Message
	for i := range 40 {
		msgs = append(msgs, pubsub.Message{Topic: fmt.Sprint("topic-", i), Payload: bytes.Repeat([]byte{byte('a' + i%26)}, 500)})
	}
	big := bytes.Repeat([]byte("B"), 20000)
	msgs = append(msgs[:20:20], append([]pubsub.Message{{Topic: "big", Payload: big}}, msgs[20:]...)...)
	var stored [][]byte
	store := func(_ context.Context, payload []byte) (int64, error) {
		stored = append(stored, payload)
		return int64(len(stored)), nil
	}
	notes, err := p.notes(t.Context(), msgs, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || !bytes.Equal(stored[0], big) {
		t.Fatalf("stored %d payloads, want only the large one", len(stored))
	}
	// 41 messages of ~700 bytes of JSON each: about 10 a note.
	if len(notes) >= len(msgs)/5 {
		t.Fatalf("%d notifications for %d messages: not packed", len(notes), len(msgs))
	}
	var got []pubsub.Message
	for _, n := range notes {
		if len(n) > notifyLimit {
			t.Fatalf("a notification of %d bytes, over the limit of %d", len(n), notifyLimit)
		}
		var nt note
		if err := json.Unmarshal([]byte(n), &nt); err != nil || nt.Origin != p.origin {
			t.Fatalf("notification %.60q: origin %q, %v", n, nt.Origin, err)
		}
		for _, it := range nt.Msgs {
			payload := it.Payload
			if it.Ref != 0 {
				payload = stored[it.Ref-1]
			}
			got = append(got, pubsub.Message{Topic: string(it.Topic), Payload: payload})
		}
	}
	if len(got) != len(msgs) {
		t.Fatalf("%d messages in the notifications, want %d", len(got), len(msgs))
	}
	for i := range msgs {
		if got[i].Topic != msgs[i].Topic || !bytes.Equal(got[i].Payload, msgs[i].Payload) {
			t.Fatalf("message %d is %q, want %q", i, got[i].Topic, msgs[i].Topic)
		}
	}
}
