// Package pubsub carries notifications between the parts of parley and
// between replicas. Notifications are hints, never the source of truth: a
// subscriber must tolerate lost, duplicated and reordered messages, and
// re-read the database when told it may have missed some.
//
// Two implementations: memory (one process, SQLite mode) and postgres
// (LISTEN/NOTIFY, many replicas). pubsubtest is the conformance suite.
package pubsub

import (
	"context"
	"errors"
)

// PubSub publishes payloads on topics and delivers them to every subscriber
// of that topic, in this process and (for shared implementations) in every
// other replica.
type PubSub interface {
	// Publish sends payload to the topic's subscribers. Any payload size is
	// accepted; an implementation with a size limit must carry large payloads
	// another way, never truncate or drop them.
	Publish(ctx context.Context, topic string, payload []byte) error
	// PublishBatch publishes msgs in order, as Publish would one by one, in
	// one round trip where the implementation can (Missed is ignored).
	PublishBatch(ctx context.Context, msgs []Message) error
	// Subscribe starts delivering the topic's messages. The subscription ends
	// when ctx is done or Close is called.
	Subscribe(ctx context.Context, topic string) (Subscription, error)
	// Close stops the PubSub and ends every subscription.
	Close() error
}

// LocalPublisher is a PubSub shared by replicas that can also publish to
// this process's subscribers only, without telling other replicas: for
// messages nobody elsewhere has asked for, such as the deltas of a chat no
// other replica streams, which would otherwise cost a round trip each.
type LocalPublisher interface {
	// PublishLocal delivers payload to this process's subscribers of the
	// topic only. It fails once the PubSub is closed, as Publish does.
	PublishLocal(topic string, payload []byte) error
}

// Outbox is a database transaction that can carry notifications: they are
// sent with its commit (PostgreSQL's NOTIFY is transactional), so listeners
// hear of a change exactly when it commits, in commit order, and never of a
// change rolled back. The PostgreSQL store's transactions are outboxes.
type Outbox interface {
	// Notify queues a notification on channel, sent when the transaction
	// commits.
	Notify(channel, payload string)
	// StorePayload stores, in the transaction, a payload too large for a
	// notification (in the pubsub_payloads table) and returns its id.
	StorePayload(ctx context.Context, payload []byte) (int64, error)
}

// Stager is a PubSub whose messages can travel in an Outbox.
type Stager interface {
	PubSub
	// Stage queues msgs in ob for the other replicas and returns the
	// function that delivers them to this replica's subscribers, to be
	// called once the transaction has committed (and not if it rolled back).
	Stage(ctx context.Context, ob Outbox, msgs []Message) (deliver func(), err error)
}

// Audience is a PubSub that knows every subscriber of a topic, because all
// of them are in this process (the in-process PubSub): a message for a topic
// nobody subscribes to may be dropped before it is even encoded.
type Audience interface {
	HasSubscribers(topic string) bool
}

// MayHear reports whether a message on topic may reach a subscriber: false
// only where ps is an Audience with none for it.
func MayHear(ps PubSub, topic string) bool {
	aud, ok := ps.(Audience)
	return !ok || aud.HasSubscribers(topic)
}

// Subscription is one subscriber's view of a topic.
type Subscription interface {
	// C delivers messages. It is closed when the subscription ends; Err then
	// says why.
	C() <-chan Message
	// Err is nil while the subscription runs, ErrLagged if it was ended for
	// not keeping up, ErrClosed after Close or the end of its context.
	Err() error
	// Close ends the subscription. It is safe to call more than once.
	Close()
}

// Message is one delivery.
type Message struct {
	Topic   string
	Payload []byte
	// Missed is set (with no payload) when messages may have been lost before
	// this one, for example while a connection was re-established: the
	// subscriber should re-read the database.
	Missed bool
}

var (
	// ErrLagged ends a subscription whose buffer filled up: the subscriber was
	// too slow, and rather than buffer without bound it must resync.
	ErrLagged = errors.New("pubsub: subscriber too slow, messages dropped")
	// ErrClosed ends a subscription that was closed.
	ErrClosed = errors.New("pubsub: subscription closed")
)
