package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/pubsub"
)

// numbered is an answer of n four-rune chunks, each different, and the
// chunks: "000 ", "001 ", ...
func numbered(n int) (string, []string) {
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("%03d ", i)
	}
	return strings.Join(chunks, ""), chunks
}

// TestStreamSubscribedBeforeRun: a stream open before the chat runs gets
// every delta of the run, in order, once.
func TestStreamSubscribedBeforeRun(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	s := newLive(t, fake)
	checkSubscribedBeforeRun(t, s, s, fake, s.token("alice"))
}

// checkSubscribedBeforeRun opens a stream on watch, then runs a chat whose
// worker is behind run: the stream gets each delta of the answer exactly
// once, in order, all naming the durable answer, before it.
func checkSubscribedBeforeRun(t *testing.T, run, watch *server, fake *llmtest.OpenAIChat, tok string) {
	t.Helper()
	answer, chunks := numbered(40)
	fake.Push(llmtest.Turn{Text: answer, ChunkSize: 4, ChunkDelay: 5 * time.Millisecond})
	c := run.createChat(tok, nil)
	st := watch.watchChat(tok, c.ID, streamOpts{})
	st.expectStatus(c.ID, chat.Waiting)
	run.postText(tok, c.ID, "go")

	evs := st.untilStatus(chat.Waiting)
	want := []string{"message", "status(pending)", "status(running)", "part...", "message", "status(waiting)"}
	if got := shapeOf(t, evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	final := messagesIn(t, evs)[1]
	var got []string
	for _, ev := range evs {
		if ev.Event != events.KindPart {
			continue
		}
		p := decodeAs[partData](t, ev)
		if p.MessageID != final.ID {
			t.Fatalf("a delta of message %d; the answer is %d", p.MessageID, final.ID)
		}
		got = append(got, p.Part.Text)
	}
	if !reflect.DeepEqual(got, chunks) {
		t.Fatalf("deltas\n%q\nwant\n%q", got, chunks)
	}
	if textOf(final) != answer {
		t.Fatalf("durable answer %q", textOf(final))
	}
}

// TestDeltasCrossReplicasOnlyWhenWatched runs a worker on replica A of one
// PostgreSQL database and listens on replica B. A run nobody streams sends
// B none of its deltas (A's own subscribers still get them all); once a
// stream on B joins mid-step, B gets the worker's snapshot first, then the
// rest of the deltas, and together they are the whole answer.
func TestDeltasCrossReplicasOnlyWhenWatched(t *testing.T) {
	a, b, fake, tok := twoReplicas(t)
	c := a.createChat(tok, nil)

	// Unwatched: B hears the run's statuses and messages, no delta.
	fake.Push(llmtest.Turn{Text: "nobody streams this", ChunkSize: 2})
	onB := listen(t, b, c.ID)
	a.postText(tok, c.ID, "first")
	for _, ev := range onB.untilStatus(chat.Waiting) {
		if ev.Kind == events.KindPart || ev.Kind == events.KindSnapshot {
			t.Fatalf("a %s event of an unwatched run reached another replica", ev.Kind)
		}
	}

	// Watched from mid-step: a stream joins on B after A's own subscriber
	// has seen five deltas.
	answer, _ := numbered(40)
	fake.Push(llmtest.Turn{Text: answer, ChunkSize: 4, ChunkDelay: 10 * time.Millisecond})
	onA := listen(t, a, c.ID)
	a.postText(tok, c.ID, "second")
	local := onA.until(func(ev events.ChatEvent) bool { return countParts(onA.seen) == 5 })
	joiner := b.watchChat(tok, c.ID, streamOpts{})
	joiner.expectStatus(c.ID, chat.Running)
	local = append(local, onA.untilStatus(chat.Waiting)...)
	seen := onB.untilStatus(chat.Waiting)

	if got := batchesOf(t, local, false); joined(got) != answer {
		t.Fatalf("A's own subscriber got %q, want %q", joined(got), answer)
	}
	snapAt := -1
	for i, ev := range seen {
		switch {
		case ev.Kind == events.KindSnapshot && snapAt < 0:
			snapAt = i
		case ev.Kind == events.KindSnapshot:
			t.Fatal("two snapshots for one stream")
		case ev.Kind == events.KindPart && snapAt < 0:
			t.Fatalf("deltas %d.. reached B before the snapshot", ev.Parts.Seq)
		}
	}
	if snapAt < 0 || len(seen[snapAt].Parts.Deltas) == 0 {
		t.Fatalf("B got no snapshot of the step, or an empty one: %+v", seen)
	}
	crossed := batchesOf(t, seen, true)
	if len(crossed) < 2 || joined(crossed) != answer {
		t.Fatalf("B got %d batches, %q; want the snapshot and more, joined to %q", len(crossed), joined(crossed), answer)
	}
	evs := joiner.untilStatus(chat.Waiting)
	if _, txt, _ := streamed(t, evs); txt != answer {
		t.Fatalf("the stream on B got %q, want %q", txt, answer)
	}
}

// rawListener reads a chat's topic straight from a replica's PubSub, as no
// stream would: it asks nothing of the worker.
type rawListener struct {
	t    *testing.T
	sub  pubsub.Subscription
	seen []events.ChatEvent
}

// listen subscribes to the chat's topic on s until the test ends.
func listen(t *testing.T, s *server, chatID string) *rawListener {
	t.Helper()
	sub, err := s.ps.Subscribe(context.Background(), events.ChatTopic(chatID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return &rawListener{t: t, sub: sub}
}

// until returns the events, from the last call on, up to and including the
// first for which stop is true.
func (l *rawListener) until(stop func(events.ChatEvent) bool) []events.ChatEvent {
	l.t.Helper()
	from := len(l.seen)
	for {
		select {
		case m, ok := <-l.sub.C():
			if !ok || m.Missed {
				l.t.Fatalf("subscription ended or missed messages: %v", l.sub.Err())
			}
			var ev events.ChatEvent
			if err := json.Unmarshal(m.Payload, &ev); err != nil {
				l.t.Fatal(err)
			}
			l.seen = append(l.seen, ev)
			if stop(ev) {
				return l.seen[from:]
			}
		case <-time.After(streamTimeout):
			l.t.Fatal("no event before the deadline")
		}
	}
}

// untilStatus returns the events up to and including a status event of want.
func (l *rawListener) untilStatus(want chat.Status) []events.ChatEvent {
	return l.until(func(ev events.ChatEvent) bool {
		return ev.Kind == events.KindStatus && ev.Chat != nil && ev.Chat.Status == want
	})
}

// countParts counts the part events among evs.
func countParts(evs []events.ChatEvent) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == events.KindPart {
			n++
		}
	}
	return n
}

// batchesOf returns the part batches among evs (and snapshots, if asked),
// failing unless they follow on from one another: each starts at or before
// the delta after the last, never beyond, and names the same message.
func batchesOf(t *testing.T, evs []events.ChatEvent, snapshots bool) []events.PartBatch {
	t.Helper()
	var out []events.PartBatch
	next := 0
	for _, ev := range evs {
		if ev.Kind != events.KindPart && !(snapshots && ev.Kind == events.KindSnapshot) {
			continue
		}
		p := *ev.Parts
		if p.Seq > next || (len(out) > 0 && p.MessageID != out[0].MessageID) {
			t.Fatalf("batch of message %d at %d after %d deltas: a gap", p.MessageID, p.Seq, next)
		}
		// Drop what was had already, as a stream does.
		p.Deltas = p.Deltas[min(next-p.Seq, len(p.Deltas)):]
		p.Seq = next
		next += len(p.Deltas)
		out = append(out, p)
	}
	return out
}

// joined is the text of batches.
func joined(batches []events.PartBatch) string {
	var b strings.Builder
	for _, p := range batches {
		for _, d := range p.Deltas {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}
