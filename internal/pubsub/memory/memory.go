// Package memory is the in-process PubSub used with SQLite, where one
// process is the whole server: messages never leave it.
package memory

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/internal/pubsub"
)

// PubSub delivers messages to subscribers in this process only.
type PubSub struct {
	hub *pubsub.Hub
}

var _ pubsub.PubSub = (*PubSub)(nil)

// Option configures New.
type Option func(*options)

type options struct {
	bufferSize int
}

// WithBufferSize sets how many messages a subscription holds before it is
// ended with pubsub.ErrLagged (default pubsub.DefaultBufferSize).
func WithBufferSize(n int) Option {
	return func(o *options) { o.bufferSize = n }
}

// New returns an in-process PubSub.
func New(opts ...Option) *PubSub {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &PubSub{hub: pubsub.NewHub(o.bufferSize)}
}

// Publish delivers a copy of payload to the topic's subscribers.
func (p *PubSub) Publish(ctx context.Context, topic string, payload []byte) error {
	if err := p.hub.Publish(topic, payload); err != nil {
		return fmt.Errorf("publish on %q: %w", topic, err)
	}
	return nil
}

// PublishBatch publishes msgs in order.
func (p *PubSub) PublishBatch(ctx context.Context, msgs []pubsub.Message) error {
	for _, m := range msgs {
		if err := p.Publish(ctx, m.Topic, m.Payload); err != nil {
			return err
		}
	}
	return nil
}

// HasSubscribers reports whether the topic has a live subscription: a
// message published to a topic without one reaches nobody, so a publisher
// may skip building it.
func (p *PubSub) HasSubscribers(topic string) bool { return p.hub.HasSubscribers(topic) }

// Subscribe starts delivering the topic's messages until ctx is done or the
// subscription is closed.
func (p *PubSub) Subscribe(ctx context.Context, topic string) (pubsub.Subscription, error) {
	s, err := p.hub.Subscribe(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %q: %w", topic, err)
	}
	return s, nil
}

// Close ends every subscription. It is safe to call more than once.
func (p *PubSub) Close() error {
	p.hub.Close()
	return nil
}
