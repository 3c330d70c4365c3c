package pubsub

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

func subscribe(t *testing.T, h *Hub, ctx context.Context, topic string) Subscription {
	t.Helper()
	s, err := h.Subscribe(ctx, topic)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", topic, err)
	}
	t.Cleanup(s.Close)
	return s
}

// waitClosed waits for the subscription's channel to close and returns Err.
func waitClosed(t *testing.T, s Subscription) error {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-s.C():
			if !ok {
				return s.Err()
			}
		case <-deadline:
			t.Fatal("subscription channel not closed in time")
		}
	}
}

func TestHubDefaultBufferSize(t *testing.T) {
	h := NewHub(0)
	defer h.Close()
	s := subscribe(t, h, context.Background(), "t")
	for i := range DefaultBufferSize {
		if err := h.Publish("t", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("Err with %d buffered messages = %v, want nil", DefaultBufferSize, err)
	}
	// The publisher never blocks: further publishes end the subscriber.
	for range 10 {
		if err := h.Publish("t", nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); !errors.Is(err, ErrLagged) {
		t.Fatalf("Err after overflow = %v, want ErrLagged", err)
	}
	if n := len(s.C()); n != DefaultBufferSize {
		t.Fatalf("%d messages still buffered, want %d", n, DefaultBufferSize)
	}
}

func TestHubMissedAll(t *testing.T) {
	h := NewHub(4)
	defer h.Close()
	a1 := subscribe(t, h, context.Background(), "a")
	a2 := subscribe(t, h, context.Background(), "a")
	b := subscribe(t, h, context.Background(), "b")
	if err := h.MissedAll(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s     Subscription
		topic string
	}{{a1, "a"}, {a2, "a"}, {b, "b"}} {
		select {
		case m := <-c.s.C():
			if !m.Missed || m.Topic != c.topic || m.Payload != nil {
				t.Fatalf("got %+v, want a Missed marker on %q", m, c.topic)
			}
		default:
			t.Fatalf("subscriber of %q got no Missed marker", c.topic)
		}
	}
}

func TestHubMissedEndsFullSubscriber(t *testing.T) {
	h := NewHub(2)
	defer h.Close()
	full := subscribe(t, h, context.Background(), "t")
	for range 2 {
		h.Publish("t", nil)
	}
	roomy := subscribe(t, h, context.Background(), "t")
	other := subscribe(t, h, context.Background(), "other")
	if err := h.Missed("t"); err != nil {
		t.Fatal(err)
	}
	if err := full.Err(); !errors.Is(err, ErrLagged) {
		t.Fatalf("Err of a full subscriber after Missed = %v, want ErrLagged", err)
	}
	if m := <-roomy.C(); !m.Missed {
		t.Fatalf("got %+v, want a Missed marker", m)
	}
	if len(other.C()) != 0 {
		t.Fatal("Missed on one topic reached another topic")
	}
}

func TestHubForgetsEndedSubscriptions(t *testing.T) {
	h := NewHub(1)
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	closed := subscribe(t, h, context.Background(), "closed")
	cancelled := subscribe(t, h, ctx, "cancelled")
	lagged := subscribe(t, h, context.Background(), "lagged")

	closed.Close()
	cancel()
	h.Publish("lagged", nil)
	h.Publish("lagged", nil)

	for _, c := range []struct {
		s    Subscription
		want error
	}{{closed, ErrClosed}, {cancelled, ErrClosed}, {lagged, ErrLagged}} {
		if err := waitClosed(t, c.s); !errors.Is(err, c.want) {
			t.Fatalf("Err = %v, want %v", err, c.want)
		}
	}
	for _, topic := range []string{"closed", "cancelled", "lagged"} {
		if h.HasSubscribers(topic) {
			t.Errorf("HasSubscribers(%q) = true after its only subscription ended", topic)
		}
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if len(h.topics) != 0 {
		t.Fatalf("hub still holds %d topics", len(h.topics))
	}
}

func TestHubCopiesPayload(t *testing.T) {
	h := NewHub(1)
	defer h.Close()
	s := subscribe(t, h, context.Background(), "t")
	p := []byte("original")
	h.Publish("t", p)
	copy(p, "MUTATED!")
	if m := <-s.C(); string(m.Payload) != "original" {
		t.Fatalf("payload = %q, want %q", m.Payload, "original")
	}
}

func TestHubClose(t *testing.T) {
	h := NewHub(1)
	a := subscribe(t, h, context.Background(), "a")
	b := subscribe(t, h, context.Background(), "b")
	h.Close()
	h.Close() // safe twice
	for _, s := range []Subscription{a, b} {
		if err := waitClosed(t, s); !errors.Is(err, ErrClosed) {
			t.Fatalf("Err after Hub.Close = %v, want ErrClosed", err)
		}
	}
	if _, err := h.Subscribe(context.Background(), "a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close: err = %v, want ErrClosed", err)
	}
	for name, err := range map[string]error{
		"Publish":   h.Publish("a", nil),
		"Missed":    h.Missed("a"),
		"MissedAll": h.MissedAll(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
}

// TestHubStartsNoGoroutines checks that subscriptions, even on cancellable
// contexts, cost no goroutine while they run.
func TestHubStartsNoGoroutines(t *testing.T) {
	h := NewHub(1)
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := runtime.NumGoroutine()
	for i := range 1000 {
		s, err := h.Subscribe(ctx, fmt.Sprint(i%10))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	if after := runtime.NumGoroutine(); after > before+5 {
		t.Fatalf("1000 subscriptions started %d goroutines", after-before)
	}
}

// TestHubConcurrent exercises every operation at once, for the race detector
// and to check that every subscription ends for a valid reason.
func TestHubConcurrent(t *testing.T) {
	h := NewHub(8)
	var pubs, subs sync.WaitGroup
	for p := range 4 {
		pubs.Go(func() {
			for i := range 2000 {
				h.Publish(fmt.Sprint(i%3), []byte{byte(p)})
				if i%100 == 0 {
					h.MissedAll()
				}
			}
		})
	}
	published := make(chan struct{})
	go func() { pubs.Wait(); close(published) }()

	var mu sync.Mutex
	var all []Subscription
	for r := range 4 {
		subs.Go(func() {
			for i := range 100 {
				ctx, cancel := context.WithCancel(context.Background())
				s, err := h.Subscribe(ctx, fmt.Sprint(i%3))
				if err != nil {
					t.Error(err)
					cancel()
					return
				}
				mu.Lock()
				all = append(all, s)
				mu.Unlock()
				for range i % 5 { // some read a little, most fall behind
					select {
					case <-s.C():
					case <-published:
					}
				}
				switch (i + r) % 3 {
				case 0:
					cancel()
				case 1:
					s.Close()
					cancel()
				default:
					defer cancel() // left to Hub.Close
				}
			}
		})
	}
	subs.Wait()
	<-published
	h.Close()
	for _, s := range all {
		if err := waitClosed(t, s); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrLagged) {
			t.Fatalf("subscription ended with %v", err)
		}
	}
}
