package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/memory"
)

// sharedPS stands for a PubSub shared by replicas (PostgreSQL), over the
// harness's memory one: it records, in order, the part and snapshot events
// published and whether each went to every replica (Publish, PublishBatch)
// or stayed in this process (PublishLocal). onBatch, when set, runs after
// each batch is delivered.
type sharedPS struct {
	mem     *memory.PubSub
	onBatch func(msgs []pubsub.Message)
	// failControl: subscriptions to control topics fail while it is above
	// zero, each one counting it down.
	failControl atomic.Int32

	mu   sync.Mutex
	sent []sentEvent
}

// sentEvent is one recorded publication.
type sentEvent struct {
	local bool
	ev    events.ChatEvent
}

var _ pubsub.LocalPublisher = (*sharedPS)(nil)

// shareDeltas makes the engines started from now on publish through a
// sharedPS over the harness's memory PubSub, and returns it.
func (h *harness) shareDeltas() *sharedPS {
	p := &sharedPS{mem: h.ps.(*memory.PubSub)}
	h.ps = p
	return p
}

func (p *sharedPS) Publish(ctx context.Context, topic string, payload []byte) error {
	p.record(topic, payload, false)
	return p.mem.Publish(ctx, topic, payload)
}

func (p *sharedPS) PublishBatch(ctx context.Context, msgs []pubsub.Message) error {
	for _, m := range msgs {
		if err := p.Publish(ctx, m.Topic, m.Payload); err != nil {
			return err
		}
	}
	if p.onBatch != nil {
		p.onBatch(msgs)
	}
	return nil
}

func (p *sharedPS) PublishLocal(topic string, payload []byte) error {
	p.record(topic, payload, true)
	return p.mem.Publish(context.Background(), topic, payload)
}

func (p *sharedPS) Subscribe(ctx context.Context, topic string) (pubsub.Subscription, error) {
	if strings.HasPrefix(topic, "control.") && p.failControl.Add(-1) >= 0 {
		return nil, errors.New("control subscription refused by the test")
	}
	return p.mem.Subscribe(ctx, topic)
}

func (p *sharedPS) Close() error { return p.mem.Close() }

// record keeps the part and snapshot events among what is published.
func (p *sharedPS) record(topic string, payload []byte, local bool) {
	if !strings.HasPrefix(topic, "chat.") {
		return
	}
	var ev events.ChatEvent
	if json.Unmarshal(payload, &ev) != nil || (ev.Kind != events.KindPart && ev.Kind != events.KindSnapshot) {
		return
	}
	p.mu.Lock()
	p.sent = append(p.sent, sentEvent{local: local, ev: ev})
	p.mu.Unlock()
}

// events returns what was recorded so far.
func (p *sharedPS) events() []sentEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sentEvent(nil), p.sent...)
}

// knowingPS is a sharedPS that also knows whether a topic has a subscriber
// in this process, as the memory PubSub does.
type knowingPS struct{ *sharedPS }

func (p knowingPS) HasSubscribers(topic string) bool { return p.mem.HasSubscribers(topic) }

// numbered is an answer of n four-rune chunks, each different: "000 001 ...".
func numbered(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%03d ", i)
	}
	return b.String()
}

// askSnapshot sends a snapshot request on the chat's control topic, as a
// stream does.
func askSnapshot(t *testing.T, ps pubsub.PubSub, chatID, nonce string) {
	t.Helper()
	ctl := events.Encode(events.Control{Kind: events.ControlSnapshot, Nonce: nonce})
	if err := ps.Publish(context.Background(), events.ControlTopic(chatID), ctl); err != nil {
		t.Fatal(err)
	}
}

// splitAtSnapshot returns the part events recorded before and after the one
// snapshot answering nonce, and the snapshot, failing unless there is
// exactly one and it went to every replica.
func splitAtSnapshot(t *testing.T, sent []sentEvent, nonce string) (before, after []sentEvent, snap events.PartBatch) {
	t.Helper()
	at := -1
	for i, s := range sent {
		if s.ev.Kind != events.KindSnapshot {
			continue
		}
		if s.ev.Nonce != nonce || at >= 0 || s.local || s.ev.Parts == nil {
			t.Fatalf("snapshot %d: %+v (local %v); want one, for %q, to every replica", i, s.ev, s.local, nonce)
		}
		at = i
	}
	if at < 0 {
		t.Fatalf("no snapshot answered %q", nonce)
	}
	return sent[:at], sent[at+1:], *sent[at].ev.Parts
}

// checkContiguous checks that batches hold deltas 0, 1, ... of one message,
// each once, and that their text is want.
func checkContiguous(t *testing.T, batches []events.PartBatch, want string) {
	t.Helper()
	var b strings.Builder
	next := 0
	for _, p := range batches {
		if p.MessageID != batches[0].MessageID || p.Seq != next {
			t.Fatalf("batch of message %d at seq %d, want message %d seq %d", p.MessageID, p.Seq, batches[0].MessageID, next)
		}
		for _, d := range p.Deltas {
			b.WriteString(d.Text)
		}
		next += len(p.Deltas)
	}
	if b.String() != want {
		t.Fatalf("deltas joined to %q, want %q", b.String(), want)
	}
}

// TestUnwatchedRunStreamsLocallyUntilASnapshotIsAsked: with a PubSub shared
// by replicas, a run nobody asked about publishes its deltas to this
// process only; a snapshot request makes it answer to every replica, then
// send the rest of the deltas there too. Sequence numbers run on throughout.
func TestUnwatchedRunStreamsLocallyUntilASnapshotIsAsked(t *testing.T) {
	h := newHarness(t)
	ps := h.shareDeltas()
	answer := numbered(30)
	h.fake.Push(llmtest.Turn{Text: answer, ChunkSize: 4, ChunkDelay: 10 * time.Millisecond})
	c := h.create("hi")
	local := h.subscribe(c.ID)
	h.start(nil)

	for parts := 0; parts < 3; {
		select {
		case ev := <-local:
			if ev.Kind == events.KindPart {
				parts++
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no deltas reached the local subscriber")
		}
	}
	askSnapshot(t, h.ps, c.ID, "n1")
	h.waitStatus(c.ID, chat.Waiting)

	before, after, snap := splitAtSnapshot(t, ps.events(), "n1")
	var batches []events.PartBatch
	for _, s := range before {
		if !s.local {
			t.Fatalf("deltas %d.. of an unwatched run went to every replica", s.ev.Parts.Seq)
		}
		batches = append(batches, *s.ev.Parts)
	}
	if len(before) < 3 || len(after) == 0 {
		t.Fatalf("%d batches before the snapshot, %d after; want 3 or more, and some", len(before), len(after))
	}
	var sofar strings.Builder
	for _, d := range snap.Deltas {
		sofar.WriteString(d.Text)
	}
	if snap.MessageID != batches[0].MessageID || !strings.HasPrefix(answer, sofar.String()) || len(snap.Deltas) != after[0].ev.Parts.Seq {
		t.Fatalf("snapshot of message %d with %d deltas %q; the next batch starts at %d", snap.MessageID, len(snap.Deltas), sofar.String(), after[0].ev.Parts.Seq)
	}
	for _, s := range after {
		if s.local {
			t.Fatalf("deltas %d.. of a watched run stayed local", s.ev.Parts.Seq)
		}
		batches = append(batches, *s.ev.Parts)
	}
	checkContiguous(t, batches, answer)
}

// TestRunHearsASnapshotRequestSentAtItsAnnouncement: a stream may ask for a
// snapshot the instant it hears that the chat is running; the run must
// already listen then, or a stream on another replica gets none of its
// deltas. Here the request is sent before the announcement's publication
// even returns.
func TestRunHearsASnapshotRequestSentAtItsAnnouncement(t *testing.T) {
	h := newHarness(t)
	ps := h.shareDeltas()
	answer := numbered(20)
	h.fake.Push(llmtest.Turn{Text: answer, ChunkSize: 4, ChunkDelay: 5 * time.Millisecond})
	c := h.create("hi")
	ps.onBatch = func(msgs []pubsub.Message) {
		for _, m := range msgs {
			var ev events.ChatEvent
			if m.Topic != events.ChatTopic(c.ID) || json.Unmarshal(m.Payload, &ev) != nil ||
				ev.Kind != events.KindStatus || ev.Chat == nil || ev.Chat.Status != chat.Running {
				continue
			}
			ctl := events.Encode(events.Control{Kind: events.ControlSnapshot, Nonce: "instant"})
			if err := ps.mem.Publish(context.Background(), events.ControlTopic(c.ID), ctl); err != nil {
				t.Error(err)
			}
		}
	}
	h.start(nil)
	h.waitStatus(c.ID, chat.Waiting)

	before, after, snap := splitAtSnapshot(t, ps.events(), "instant")
	batches := []events.PartBatch{}
	if len(snap.Deltas) > 0 {
		batches = append(batches, snap)
	}
	for _, s := range after {
		if s.local {
			t.Fatalf("deltas %d.. of a watched run stayed local", s.ev.Parts.Seq)
		}
		batches = append(batches, *s.ev.Parts)
	}
	// Whatever was flushed before the snapshot, the snapshot and what
	// followed it everywhere hold the whole answer.
	if len(batches) == 0 {
		t.Fatalf("nothing reached other replicas; %d batches stayed local", len(before))
	}
	checkContiguous(t, batches, answer)
}

// TestUnheardDeltasAreNotPublished: where the PubSub knows a topic has no
// subscriber in this process, an unwatched run's deltas are not published
// at all; the durable answer is whole.
func TestUnheardDeltasAreNotPublished(t *testing.T) {
	h := newHarness(t)
	ps := h.shareDeltas()
	h.ps = knowingPS{ps}
	answer := numbered(10)
	h.fake.Push(llmtest.Turn{Text: answer, ChunkSize: 4})
	c := h.create("hi")
	h.start(nil)
	h.waitStatus(c.ID, chat.Waiting)

	if sent := ps.events(); len(sent) != 0 {
		t.Fatalf("%d part events published with nobody to hear them: %+v", len(sent), sent)
	}
	msgs := h.history(c.ID)
	if last := msgs[len(msgs)-1]; last.Role != chat.RoleAssistant || last.Parts[0].Text != answer {
		t.Fatalf("durable answer %+v", last)
	}
}

// TestRunWithoutItsControlSubscriptionIsWatched: requests sent while a run
// had no control subscription are lost, a snapshot request among them
// maybe, so such a run sends its deltas to every replica.
func TestRunWithoutItsControlSubscriptionIsWatched(t *testing.T) {
	h := newHarness(t)
	ps := h.shareDeltas()
	ps.failControl.Store(1) // the one made before the announcement
	answer := numbered(10)
	h.fake.Push(llmtest.Turn{Text: answer, ChunkSize: 4, ChunkDelay: 2 * time.Millisecond})
	c := h.create("hi")
	h.start(nil)
	h.waitStatus(c.ID, chat.Waiting)
	sent := ps.events()
	if len(sent) == 0 {
		t.Fatal("no deltas published")
	}
	var batches []events.PartBatch
	for _, s := range sent {
		if s.local {
			t.Fatalf("deltas %d.. stayed on this replica, though a request may have been lost", s.ev.Parts.Seq)
		}
		batches = append(batches, *s.ev.Parts)
	}
	checkContiguous(t, batches, answer)
}
