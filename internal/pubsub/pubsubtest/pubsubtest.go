// Package pubsubtest is the conformance suite every pubsub.PubSub
// implementation must pass: Run for the behaviour of one instance, RunShared
// for implementations that carry messages between replicas.
package pubsubtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/pubsub"
)

// timeout bounds every wait of the suite, so a bug fails a test instead of
// hanging it.
const timeout = 10 * time.Second

// Run runs the conformance subtests. open must return a fresh PubSub and
// arrange for it to be closed when the test ends; Close must be safe to call
// twice, as some subtests close it themselves. The subtests run in parallel,
// so instances must not see each other's messages.
func Run(t *testing.T, open func(t *testing.T) pubsub.PubSub) {
	for _, c := range []struct {
		name string
		test func(t *testing.T, ps pubsub.PubSub)
	}{
		{"DeliversOnlyItsTopic", testOnlyItsTopic},
		{"EverySubscriberGetsEveryMessage", testEverySubscriber},
		{"PreservesOrder", func(t *testing.T, ps pubsub.PubSub) { testOrder(t, ps, ps) }},
		{"PayloadsIntact", func(t *testing.T, ps pubsub.PubSub) { testPayloads(t, ps, ps) }},
		{"SlowSubscriberLags", testSlowSubscriber},
		{"CloseEndsSubscription", testCloseSubscription},
		{"CancelEndsSubscription", testCancelSubscription},
		{"CloseEndsAll", testCloseAll},
		{"PublishAfterSubscriberLeft", testSubscriberLeft},
		{"BatchInOrder", func(t *testing.T, ps pubsub.PubSub) { testBatch(t, ps, ps) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, open(t))
		})
	}
}

// RunShared runs the subtests of implementations shared across replicas:
// open2 returns two fresh instances that reach each other (as two replicas
// on one database would) and arranges for both to be closed. The subtests
// run in parallel, so open2 must not let them see each other's messages.
func RunShared(t *testing.T, open2 func(t *testing.T) (a, b pubsub.PubSub)) {
	for _, c := range []struct {
		name string
		test func(t *testing.T, a, b pubsub.PubSub)
	}{
		{"CrossesReplicas", testCrosses},
		{"OwnMessagesOnce", testOwnOnce},
		{"OnlyItsTopicAcross", testOnlyItsTopicAcross},
		{"OrderAcross", testOrder},
		{"PayloadsAcross", testPayloads},
		{"BatchAcross", testBatch},
		{"PublishLocalStaysLocal", testLocalStaysLocal},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, b := open2(t)
			c.test(t, a, b)
		})
	}
}

func testOnlyItsTopic(t *testing.T, ps pubsub.PubSub) {
	sub := subscribe(t, ps, "mine")
	publish(t, ps, "other", "not for you")
	publish(t, ps, "mine", "one")
	publish(t, ps, "other", "still not for you")
	publish(t, ps, "mine", "two")
	// Messages of one publisher arrive in order, so seeing "one" then "two"
	// proves nothing of "other" came in between or before.
	expectPayloads(t, sub, "one", "two")
	publish(t, ps, "other", "")
	publish(t, ps, "mine", "three")
	expectPayloads(t, sub, "three")
}

func testEverySubscriber(t *testing.T, ps pubsub.PubSub) {
	subs := []pubsub.Subscription{subscribe(t, ps, "t"), subscribe(t, ps, "t"), subscribe(t, ps, "t")}
	for i := range 5 {
		publish(t, ps, "t", fmt.Sprint(i))
	}
	for _, sub := range subs {
		expectPayloads(t, sub, "0", "1", "2", "3", "4")
	}
}

// testOrder publishes many messages on pub and checks that a subscriber on
// sub gets them in order.
func testOrder(t *testing.T, pub, sub pubsub.PubSub) {
	const n = 200 // below any reasonable buffer size, so nobody lags
	s := subscribe(t, sub, "ordered")
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprint(i)
		publish(t, pub, "ordered", want[i])
	}
	expectPayloads(t, s, want...)
}

// testPayloads checks that payloads of every size and any bytes published on
// pub reach a subscriber on sub intact.
func testPayloads(t *testing.T, pub, sub pubsub.PubSub) {
	s := subscribe(t, sub, "payloads")
	var payloads [][]byte
	// Sizes around the 8000-byte NOTIFY limit catch off-by-one errors in
	// implementations that carry large payloads another way.
	for _, n := range []int{0, 1, 4000, 5600, 5700, 6000, 7999, 8000, 8001, 100 << 10} {
		payloads = append(payloads, pattern(n))
	}
	// NUL, invalid UTF-8, a lone continuation byte, and bytes that need
	// escaping in JSON, SQL and text protocols.
	payloads = append(payloads, []byte("a\x00b\xff\xfe\x80'\"\\\n\r\t%s$1;--"))
	for _, p := range payloads {
		if err := pub.Publish(context.Background(), "payloads", p); err != nil {
			t.Fatalf("Publish %d bytes: %v", len(p), err)
		}
	}
	for _, p := range payloads {
		m := receive(t, s)
		if !bytes.Equal(m.Payload, p) {
			t.Fatalf("payload of %d bytes arrived as %d bytes (first difference at %d)",
				len(p), len(m.Payload), firstDiff(m.Payload, p))
		}
		if m.Topic != "payloads" || m.Missed {
			t.Fatalf("message = {Topic: %q, Missed: %v}, want topic %q", m.Topic, m.Missed, "payloads")
		}
	}
}

func testSlowSubscriber(t *testing.T, ps pubsub.PubSub) {
	slow := subscribe(t, ps, "t")
	fast := subscribe(t, ps, "t")
	// Publish in lockstep with the fast subscriber until the slow one, which
	// never reads, is ended: its buffer is bounded, so that must happen.
	const limit = 100_000
	n := 0
	for ; slow.Err() == nil; n++ {
		if n == limit {
			t.Fatalf("slow subscriber still running after %d unread messages", n)
		}
		publish(t, ps, "t", fmt.Sprint(n))
		expectPayloads(t, fast, fmt.Sprint(n))
	}
	if err := slow.Err(); !errors.Is(err, pubsub.ErrLagged) {
		t.Fatalf("slow subscriber Err = %v, want ErrLagged", err)
	}
	// What was buffered before it lagged is still readable, in order, then
	// the channel is closed.
	got := drain(t, slow)
	if len(got) == 0 || len(got) >= n {
		t.Fatalf("slow subscriber buffered %d of %d messages, want some but not all", len(got), n)
	}
	for i, m := range got {
		if string(m.Payload) != fmt.Sprint(i) {
			t.Fatalf("slow subscriber message %d = %q, want %q", i, m.Payload, fmt.Sprint(i))
		}
	}
	publish(t, ps, "t", "after")
	expectPayloads(t, fast, "after")
	if err := fast.Err(); err != nil {
		t.Fatalf("fast subscriber Err = %v, want nil", err)
	}
}

func testCloseSubscription(t *testing.T, ps pubsub.PubSub) {
	sub := subscribe(t, ps, "t")
	other := subscribe(t, ps, "t")
	if err := sub.Err(); err != nil {
		t.Fatalf("Err of a running subscription = %v, want nil", err)
	}
	sub.Close()
	sub.Close() // safe twice
	drain(t, sub)
	if err := sub.Err(); !errors.Is(err, pubsub.ErrClosed) {
		t.Fatalf("Err after Close = %v, want ErrClosed", err)
	}
	publish(t, ps, "t", "still here")
	expectPayloads(t, other, "still here")
}

func testCancelSubscription(t *testing.T, ps pubsub.PubSub) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := ps.Subscribe(ctx, "t")
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	other := subscribe(t, ps, "t")
	publish(t, ps, "t", "before")
	expectPayloads(t, sub, "before")
	cancel()
	drain(t, sub)
	if err := sub.Err(); !errors.Is(err, pubsub.ErrClosed) {
		t.Fatalf("Err after cancel = %v, want ErrClosed", err)
	}
	publish(t, ps, "t", "after")
	expectPayloads(t, other, "before", "after")

	// A context that is already done ends the subscription at once.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if sub, err := ps.Subscribe(done, "t"); err == nil {
		defer sub.Close()
		drain(t, sub)
		if err := sub.Err(); !errors.Is(err, pubsub.ErrClosed) {
			t.Fatalf("Err of a subscription on a done context = %v, want ErrClosed", err)
		}
	}
}

func testCloseAll(t *testing.T, ps pubsub.PubSub) {
	subs := []pubsub.Subscription{subscribe(t, ps, "a"), subscribe(t, ps, "a"), subscribe(t, ps, "b")}
	publish(t, ps, "a", "x")
	if err := ps.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, sub := range subs {
		drain(t, sub)
		if err := sub.Err(); !errors.Is(err, pubsub.ErrClosed) {
			t.Fatalf("subscription %d: Err after PubSub.Close = %v, want ErrClosed", i, err)
		}
	}
	if err := ps.Publish(context.Background(), "a", []byte("late")); err == nil {
		t.Fatalf("Publish after Close succeeded, want an error")
	}
	if sub, err := ps.Subscribe(context.Background(), "a"); err == nil {
		sub.Close()
		t.Fatalf("Subscribe after Close succeeded, want an error")
	}
}

func testSubscriberLeft(t *testing.T, ps pubsub.PubSub) {
	gone := subscribe(t, ps, "t")
	gone.Close()
	publish(t, ps, "t", "nobody listens")
	stays := subscribe(t, ps, "t")
	publish(t, ps, "t", "one")
	expectPayloads(t, stays, "one")
	stays.Close()
	publish(t, ps, "t", "nobody again")
}

func testCrosses(t *testing.T, a, b pubsub.PubSub) {
	subA := subscribe(t, a, "t")
	subB := subscribe(t, b, "t")
	publish(t, a, "t", "from a")
	expectPayloads(t, subA, "from a")
	expectPayloads(t, subB, "from a")
	publish(t, b, "t", "from b")
	expectPayloads(t, subA, "from b")
	expectPayloads(t, subB, "from b")
}

// testOwnOnce checks that a replica does not deliver its own messages twice
// (once directly, once as they come back from the other replicas).
func testOwnOnce(t *testing.T, a, b pubsub.PubSub) {
	subA := subscribe(t, a, "t")
	subB := subscribe(t, b, "t")
	publish(t, a, "t", "1")
	publish(t, a, "t", "2")
	expectPayloads(t, subB, "1", "2")
	// b's message is sent after a's two, so any echo of them would reach a
	// before it.
	publish(t, b, "t", "3")
	expectPayloads(t, subA, "1", "2", "3")
}

func testOnlyItsTopicAcross(t *testing.T, a, b pubsub.PubSub) {
	sub := subscribe(t, b, "mine")
	publish(t, a, "other", "not for you")
	publish(t, a, "mine", "one")
	publish(t, a, "other", "still not for you")
	publish(t, a, "mine", "two")
	expectPayloads(t, sub, "one", "two")
}

// testLocalStaysLocal checks, for a pubsub.LocalPublisher, that PublishLocal
// reaches the replica's own subscribers in order with its other messages,
// never another replica's, and fails after Close.
func testLocalStaysLocal(t *testing.T, a, b pubsub.PubSub) {
	lp, ok := a.(pubsub.LocalPublisher)
	if !ok {
		t.Skip("not a pubsub.LocalPublisher")
	}
	subA := subscribe(t, a, "t")
	subB := subscribe(t, b, "t")
	publish(t, a, "t", "1")
	if err := lp.PublishLocal("t", []byte("local")); err != nil {
		t.Fatalf("PublishLocal: %v", err)
	}
	publish(t, a, "t", "2")
	expectPayloads(t, subA, "1", "local", "2")
	// Had "local" crossed, it would reach b between the other two.
	expectPayloads(t, subB, "1", "2")
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := lp.PublishLocal("t", []byte("late")); err == nil {
		t.Fatal("PublishLocal after Close succeeded, want an error")
	}
}

// subscribe subscribes for the rest of the test.
func subscribe(t *testing.T, ps pubsub.PubSub, topic string) pubsub.Subscription {
	t.Helper()
	sub, err := ps.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", topic, err)
	}
	t.Cleanup(sub.Close)
	return sub
}

func publish(t *testing.T, ps pubsub.PubSub, topic, payload string) {
	t.Helper()
	if err := ps.Publish(context.Background(), topic, []byte(payload)); err != nil {
		t.Fatalf("Publish(%q, %q): %v", topic, payload, err)
	}
}

// receive returns the next message, failing if none comes in time or the
// subscription ends.
func receive(t *testing.T, sub pubsub.Subscription) pubsub.Message {
	t.Helper()
	select {
	case m, ok := <-sub.C():
		if !ok {
			t.Fatalf("subscription ended while a message was expected: %v", sub.Err())
		}
		return m
	case <-time.After(timeout):
		t.Fatalf("no message within %v", timeout)
	}
	panic("unreachable")
}

// expectPayloads receives len(want) messages and checks their payloads.
func expectPayloads(t *testing.T, sub pubsub.Subscription, want ...string) {
	t.Helper()
	for i, w := range want {
		m := receive(t, sub)
		if m.Missed || string(m.Payload) != w {
			t.Fatalf("message %d = {Payload: %.40q, Missed: %v}, want payload %q", i, m.Payload, m.Missed, w)
		}
	}
}

// drain reads what is left of an ended subscription and checks that its
// channel gets closed.
func drain(t *testing.T, sub pubsub.Subscription) []pubsub.Message {
	t.Helper()
	var got []pubsub.Message
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-sub.C():
			if !ok {
				return got
			}
			got = append(got, m)
		case <-deadline:
			t.Fatalf("subscription channel not closed within %v", timeout)
		}
	}
}

// pattern returns n bytes covering every byte value.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/256)
	}
	return b
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// testBatch publishes one batch on pub that mixes topics and a payload over
// the NOTIFY limit, and checks each subscriber on sub gets its topic's
// messages in order.
func testBatch(t *testing.T, pub, sub pubsub.PubSub) {
	a, b := subscribe(t, sub, "batch-a"), subscribe(t, sub, "batch-b")
	big := string(pattern(20 << 10))
	msgs := []pubsub.Message{
		{Topic: "batch-a", Payload: []byte("a1")}, {Topic: "batch-b", Payload: []byte("b1")},
		{Topic: "batch-a", Payload: []byte(big)}, {Topic: "batch-a", Payload: []byte("a3")},
		{Topic: "batch-b", Payload: []byte("b2")},
	}
	if err := pub.PublishBatch(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishBatch(context.Background(), nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	expectPayloads(t, a, "a1", big, "a3")
	expectPayloads(t, b, "b1", "b2")
}
