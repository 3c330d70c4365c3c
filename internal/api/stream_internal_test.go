package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
)

func textBatch(msg int64, seq int, texts ...string) *events.PartBatch {
	b := &events.PartBatch{MessageID: msg, Seq: seq}
	for _, t := range texts {
		b.Deltas = append(b.Deltas, events.Delta{Type: events.DeltaText, Text: t})
	}
	return b
}

// sentText concatenates the text of the part events written so far.
func sentText(rec *httptest.ResponseRecorder) string {
	var b strings.Builder
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if i := strings.Index(line, `"text":"`); strings.HasPrefix(line, "data: ") && i > 0 {
			rest := line[i+len(`"text":"`):]
			b.WriteString(rest[:strings.IndexByte(rest, '"')])
		}
	}
	return b.String()
}

// TestChatStreamNeverSendsAGap: a snapshot that arrives after the wait gave
// up still fills the hole before any later delta goes out; deltas the
// durable message already covers are dropped.
func TestChatStreamNeverSendsAGap(t *testing.T) {
	rec := httptest.NewRecorder()
	s := &chatStream{sse: newSSE(rec), seq: map[int64]int{}, nonce: "n1", holding: true}
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
	if got := sentText(rec); got != "" {
		t.Fatalf("sent %q before the gap was filled", got)
	}
	// The late snapshot (deltas 0..3) arrives: everything goes out in order, once.
	if err := s.live(events.ChatEvent{Kind: events.KindSnapshot, Nonce: "n1", Parts: textBatch(7, 0, "a", "b", "c", "d")}); err != nil {
		t.Fatal(err)
	}
	if got := sentText(rec); got != "abcdef" {
		t.Fatalf("sent %q, want abcdef", got)
	}
	if err := s.parts(textBatch(7, 6, "g")); err != nil || sentText(rec) != "abcdefg" {
		t.Fatalf("live delta after the fill: %q %v", sentText(rec), err)
	}
	// A gap the run never fills is dropped when the run ends.
	if err := s.parts(textBatch(7, 9, "z")); err != nil {
		t.Fatal(err)
	}
	if err := s.live(events.ChatEvent{Kind: events.KindStatus, Chat: &chat.Chat{ID: "c", Status: chat.Waiting, Version: 2}}); err != nil {
		t.Fatal(err)
	}
	if len(s.held) != 0 || strings.Contains(sentText(rec), "z") {
		t.Fatalf("held %d, sent %q", len(s.held), sentText(rec))
	}
}

// TestChatStreamStatusOnlyMovesForward: a status event that reaches the
// stream after a newer (or the same) chat went out, such as a change
// committed just before the stream's first status read but delivered after
// it, is dropped; a newer one goes out.
func TestChatStreamStatusOnlyMovesForward(t *testing.T) {
	rec := httptest.NewRecorder()
	s := &chatStream{sse: newSSE(rec), seq: map[int64]int{}}
	sent := func() []string {
		var got []string
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if i := strings.LastIndex(line, `},"status":"`); strings.HasPrefix(line, "data: ") && i > 0 {
				rest := line[i+len(`},"status":"`):]
				got = append(got, rest[:strings.IndexByte(rest, '"')])
			}
		}
		return got
	}
	status := func(st chat.Status, version int64) events.ChatEvent {
		return events.ChatEvent{Kind: events.KindStatus, Chat: &chat.Chat{ID: "c", Status: st, Version: version}}
	}
	if err := s.status(chat.Chat{ID: "c", Status: chat.Waiting, Version: 4}); err != nil { // the first status
		t.Fatal(err)
	}
	for _, ev := range []events.ChatEvent{
		status(chat.Running, 3), // the run that ended before the stream read the chat
		status(chat.Waiting, 4), // its end: what the first status showed
		status(chat.Pending, 5), // news
		status(chat.Running, 6),
		status(chat.Pending, 5), // late again
		status(chat.Waiting, 0), // from a replica that knows no versions: sent
	} {
		if err := s.live(ev); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := strings.Join(sent(), " "), "waiting pending running waiting"; got != want {
		t.Fatalf("statuses sent: %s, want %s", got, want)
	}
	if s.startedRunning(status(chat.Running, 6)) || !s.startedRunning(status(chat.Running, 7)) {
		t.Fatal("a stale running event asks for a snapshot, or a new one does not")
	}
}
