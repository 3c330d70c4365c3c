package events

import (
	"context"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/pubsub"
)

// DeltasStayWithWorker reports whether a run's deltas may stay on its
// worker's replica until a subscriber asks for them: only where the PubSub
// spans replicas (it can publish locally). In-process, every delta reaches
// every subscriber anyway, and a request per stream at every run's start
// would only cost.
func DeltasStayWithWorker(ps pubsub.PubSub) bool {
	_, ok := ps.(pubsub.LocalPublisher)
	return ok
}

// AskSnapshot asks the worker running the chat, on whatever replica, for a
// snapshot of the step in progress, and returns the request's nonce (the
// answer carries it). The request also makes the worker send the rest of
// the run's deltas to every replica.
func AskSnapshot(ctx context.Context, ps pubsub.PubSub, chatID string) (nonce string, err error) {
	nonce = uuid.NewString()
	return nonce, ps.Publish(ctx, ControlTopic(chatID), Encode(Control{Kind: ControlSnapshot, Nonce: nonce}))
}
