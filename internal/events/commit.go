package events

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/store"
)

// Commit runs fn in a transaction (inTx: a store's InTx) and
// announces the Notice fn recorded (fn gets it empty on every attempt).
// Where the transaction is a pubsub.Outbox and ps a pubsub.Stager
// (PostgreSQL), the notifications go out with the commit itself: other
// replicas hear of the change exactly when it commits, in commit order, and
// no round trip is spent on them. Elsewhere they are published right after
// the commit. Either way this replica's subscribers get them after the
// commit, from the transaction's AfterCommit: where the store commits in
// groups (SQLite), in commit order.
func Commit(ctx context.Context, inTx func(context.Context, func(store.Tx) error) error, ps pubsub.PubSub, log *slog.Logger, fn func(tx store.Tx, n *Notice) error) error {
	return inTx(ctx, func(tx store.Tx) error {
		n := &Notice{}
		if err := fn(tx, n); err != nil {
			return err
		}
		deliver, err := n.stage(ctx, tx, ps)
		if err != nil {
			return err
		}
		if deliver == nil {
			deliver = func() { n.Publish(ctx, ps, log) }
		}
		tx.AfterCommit(deliver)
		return nil
	})
}

// stage queues the notice's messages in tx when tx and ps allow it, and
// returns their local delivery; nil means publish after the commit instead.
// A failure to stage fails the write: staging runs statements in the
// transaction (large payloads, and the statements waiting to go with them),
// and on PostgreSQL a failed statement has ended the transaction anyway,
// with the error (a lost lease, say) that the caller must see.
func (n *Notice) stage(ctx context.Context, tx store.Tx, ps pubsub.PubSub) (func(), error) {
	ob, isOutbox := tx.(pubsub.Outbox)
	st, isStager := ps.(pubsub.Stager)
	if !isOutbox || !isStager {
		return nil, nil
	}
	msgs := n.messages(ps)
	if len(msgs) == 0 {
		return func() {}, nil
	}
	deliver, err := st.Stage(ctx, ob, msgs)
	if err != nil {
		return nil, fmt.Errorf("stage %d events: %w", len(msgs), err)
	}
	return deliver, nil
}
