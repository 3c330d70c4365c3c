package pubsub

import (
	"context"
	"fmt"
	"sync"
)

// DefaultBufferSize is how many messages a subscription holds before it is
// ended with ErrLagged, when NewHub is given no positive size.
const DefaultBufferSize = 256

// Hub fans messages out to the subscribers of a topic within one process.
// Each subscription has a bounded buffer: a subscriber that lets it fill up
// is ended with ErrLagged, so a publisher never blocks on a slow subscriber
// and nothing is buffered without bound. A Hub keeps no goroutine per
// subscription, so it scales to many topics and subscribers.
type Hub struct {
	size int

	mu     sync.RWMutex
	topics map[string]map[*hubSub]struct{}
	closed bool
}

// NewHub returns a Hub whose subscriptions buffer size messages each
// (DefaultBufferSize if size <= 0).
func NewHub(size int) *Hub {
	if size <= 0 {
		size = DefaultBufferSize
	}
	return &Hub{size: size, topics: make(map[string]map[*hubSub]struct{})}
}

// errHubClosed is returned by a Hub (and the PubSubs built on it) after Close.
var errHubClosed = fmt.Errorf("pubsub is closed: %w", ErrClosed)

// Subscribe starts delivering the topic's messages until ctx is done, the
// subscription is closed, it lags, or the Hub is closed.
func (h *Hub) Subscribe(ctx context.Context, topic string) (Subscription, error) {
	s := &hubSub{hub: h, topic: topic, ch: make(chan Message, h.size)}
	// AfterFunc starts no goroutine until ctx is done, so idle subscriptions
	// cost only memory.
	s.stop = context.AfterFunc(ctx, func() { s.end(ErrClosed) })

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.stop()
		return nil, errHubClosed
	}
	// If ctx was already done, the AfterFunc may have ended s already; it
	// must not be added then, as nothing would remove it.
	if s.Err() == nil {
		subs := h.topics[topic]
		if subs == nil {
			subs = make(map[*hubSub]struct{})
			h.topics[topic] = subs
		}
		subs[s] = struct{}{}
	}
	return s, nil
}

// Publish delivers a copy of payload to the topic's subscribers, ending those
// whose buffer is full with ErrLagged. It never blocks on a subscriber.
func (h *Hub) Publish(topic string, payload []byte) error {
	msg := Message{Topic: topic, Payload: append([]byte(nil), payload...)}
	return h.send(topic, msg)
}

// Missed tells the topic's subscribers that they may have missed messages.
func (h *Hub) Missed(topic string) error {
	return h.send(topic, Message{Topic: topic, Missed: true})
}

// MissedAll tells every subscriber of every topic that it may have missed
// messages, for example after a connection to other replicas was lost.
func (h *Hub) MissedAll() error {
	h.mu.RLock()
	if h.closed {
		h.mu.RUnlock()
		return errHubClosed
	}
	var lagged []*hubSub
	for topic, subs := range h.topics {
		lagged = deliver(subs, Message{Topic: topic, Missed: true}, lagged)
	}
	h.mu.RUnlock()
	h.removeAll(lagged)
	return nil
}

// HasSubscribers reports whether the topic has a live subscription, so that
// work done only for local subscribers can be skipped.
func (h *Hub) HasSubscribers(topic string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.topics[topic]) > 0
}

// Close ends every subscription with ErrClosed; later calls to Subscribe
// and Publish fail. It is safe to call more than once.
func (h *Hub) Close() {
	h.mu.Lock()
	topics := h.topics
	h.topics = nil
	h.closed = true
	h.mu.Unlock()
	for _, subs := range topics {
		for s := range subs {
			s.stop()
			s.end(ErrClosed)
		}
	}
}

// send delivers msg to the topic's subscribers and drops the lagging ones.
func (h *Hub) send(topic string, msg Message) error {
	h.mu.RLock()
	if h.closed {
		h.mu.RUnlock()
		return errHubClosed
	}
	lagged := deliver(h.topics[topic], msg, nil)
	h.mu.RUnlock()
	h.removeAll(lagged)
	return nil
}

// deliver offers msg to each of subs and appends the ones it ended to lagged.
func deliver(subs map[*hubSub]struct{}, msg Message, lagged []*hubSub) []*hubSub {
	for s := range subs {
		if s.offer(msg) {
			lagged = append(lagged, s)
		}
	}
	return lagged
}

// removeAll forgets ended subscriptions.
func (h *Hub) removeAll(subs []*hubSub) {
	for _, s := range subs {
		s.stop()
		h.remove(s)
	}
}

// remove forgets one subscription.
func (h *Hub) remove(s *hubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(s)
}

// removeLocked forgets one subscription; h.mu must be held.
func (h *Hub) removeLocked(s *hubSub) {
	subs := h.topics[s.topic]
	delete(subs, s)
	if len(subs) == 0 {
		delete(h.topics, s.topic)
	}
}

// hubSub is one subscription of a Hub. Lock order: Hub.mu, then hubSub.mu.
type hubSub struct {
	hub   *Hub
	topic string
	ch    chan Message
	stop  func() bool // unregisters the ctx callback

	mu  sync.Mutex
	err error // set once, when the subscription ends and ch is closed
}

func (s *hubSub) C() <-chan Message { return s.ch }

func (s *hubSub) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *hubSub) Close() {
	s.stop()
	s.end(ErrClosed)
}

// offer queues msg without blocking; if the buffer is full it ends the
// subscription with ErrLagged and reports true.
func (s *hubSub) offer(msg Message) (lagged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	select {
	case s.ch <- msg:
		return false
	default:
		s.err = ErrLagged
		close(s.ch)
		return true
	}
}

// end closes the subscription with err, unless it has already ended, and
// removes it from its Hub. Both happen under the Hub's lock, so whoever sees
// the channel closed also sees the subscription gone, and Subscribe never
// adds a subscription that has ended.
func (s *hubSub) end(err error) {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		close(s.ch)
	}
	s.mu.Unlock()
	s.hub.removeLocked(s)
}
