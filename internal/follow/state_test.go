package follow

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
)

// recorder is a View that records what it is shown.
type recorder struct {
	text     strings.Builder // the text of the part events
	statuses []string
}

func (r *recorder) Chat(c chat.Chat) error {
	r.statuses = append(r.statuses, string(c.Status))
	return nil
}

func (r *recorder) Event(ev events.ChatEvent) error {
	if ev.Kind == events.KindPart {
		for _, d := range ev.Parts.Deltas {
			r.text.WriteString(d.Text)
		}
	}
	return nil
}

func textBatch(msg int64, seq int, texts ...string) *events.PartBatch {
	b := &events.PartBatch{MessageID: msg, Seq: seq}
	for _, t := range texts {
		b.Deltas = append(b.Deltas, events.Delta{Type: events.DeltaText, Text: t})
	}
	return b
}

// TestFollowNeverShowsAGap: a snapshot that arrives after the wait gave up
// still fills the hole before any later delta is shown; deltas the durable
// message already covers are dropped.
func TestFollowNeverShowsAGap(t *testing.T) {
	rec := &recorder{}
	s := &state{view: rec, seq: map[int64]int{}, nonce: "n1", holding: true}
	if err := s.parts(textBatch(7, 3, "d", "e")); err != nil {
		t.Fatal(err)
	}
	// The snapshot wait times out: deltas 3.. do not follow 0, so they stay held.
	if err := s.flushHeld(); err != nil {
		t.Fatal(err)
	}
	s.holding = false
	if err := s.parts(textBatch(7, 5, "f")); err != nil {
		t.Fatal(err)
	}
	if got := rec.text.String(); got != "" {
		t.Fatalf("showed %q before the gap was filled", got)
	}
	// The late snapshot (deltas 0..3) arrives: everything goes out in order, once.
	if err := s.live(events.ChatEvent{Kind: events.KindSnapshot, Nonce: "n1", Parts: textBatch(7, 0, "a", "b", "c", "d")}); err != nil {
		t.Fatal(err)
	}
	if got := rec.text.String(); got != "abcdef" {
		t.Fatalf("showed %q, want abcdef", got)
	}
	if err := s.parts(textBatch(7, 6, "g")); err != nil || rec.text.String() != "abcdefg" {
		t.Fatalf("live delta after the fill: %q %v", rec.text.String(), err)
	}
	// A gap the run never fills is dropped when the run ends.
	if err := s.parts(textBatch(7, 9, "z")); err != nil {
		t.Fatal(err)
	}
	if err := s.live(events.ChatEvent{Kind: events.KindStatus, Chat: &chat.Chat{ID: "c", Status: chat.Waiting, Version: 2}}); err != nil {
		t.Fatal(err)
	}
	if len(s.held) != 0 || strings.Contains(rec.text.String(), "z") {
		t.Fatalf("held %d, showed %q", len(s.held), rec.text.String())
	}
}

// TestFollowStatusOnlyMovesForward: a status event that reaches the follow
// after a newer (or the same) chat was shown, such as a change committed
// just before the first read but delivered after it, is dropped; a newer
// one is shown. Every running announcement asks for a snapshot, whatever
// its version.
func TestFollowStatusOnlyMovesForward(t *testing.T) {
	rec := &recorder{}
	s := &state{view: rec, seq: map[int64]int{}}
	status := func(st chat.Status, version int64) events.ChatEvent {
		return events.ChatEvent{Kind: events.KindStatus, Chat: &chat.Chat{ID: "c", Status: st, Version: version}}
	}
	if err := s.chat(chat.Chat{ID: "c", Status: chat.Waiting, Version: 4}); err != nil { // the first read
		t.Fatal(err)
	}
	for _, ev := range []events.ChatEvent{
		status(chat.Running, 3), // the run that ended before the follow read the chat
		status(chat.Waiting, 4), // its end: what the first read showed
		status(chat.Pending, 5), // news
		status(chat.Running, 6),
		status(chat.Pending, 5), // late again
		status(chat.Waiting, 0), // from a replica that knows no versions: shown
	} {
		if err := s.live(ev); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := strings.Join(rec.statuses, " "), "waiting pending running waiting"; got != want {
		t.Fatalf("statuses shown: %s, want %s", got, want)
	}
	if !announcesRun(status(chat.Running, 6)) || announcesRun(status(chat.Waiting, 7)) {
		t.Fatal("a running announcement already seen does not ask for a snapshot, or a waiting one does")
	}
}
