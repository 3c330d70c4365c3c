package postgres

import (
	"crypto/rand"
	"strings"
	"testing"
)

// TestOwnNotificationsStartWithOwnPrefix: the listener skips a notification
// by its first bytes, so every notification this instance sends, whatever
// its topic and payload, must start with its prefix, and another
// instance's must not.
func TestOwnNotificationsStartWithOwnPrefix(t *testing.T) {
	mk := func() *PubSub {
		origin := rand.Text()
		return &PubSub{origin: origin, ownPrefix: framePrefix(origin)}
	}
	p, other := mk(), mk()
	for _, payload := range [][]byte{nil, []byte(`{"o":"x"}`), []byte(`"quoted" \ and unicode é`)} {
		note, err := p.notification(t.Context(), "chat.\"odd\" topic", payload, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(note, p.ownPrefix) {
			t.Errorf("notification %q does not start with its own prefix %q", note, p.ownPrefix)
		}
		if strings.HasPrefix(note, other.ownPrefix) {
			t.Errorf("notification %q starts with another instance's prefix", note)
		}
	}
}
