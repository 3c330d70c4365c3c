package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// A worker's write at the end of a step is a fence, the step's messages
// (with reserved ids) and a status change from running. Here the inserts
// travel inside the status change: its UPDATE checks the lease in its WHERE
// clause (it locks the row and, after waiting for another transaction's
// lock, re-checks the lease against the row as that transaction left it),
// and the inserts hang off its RETURNING, so they happen only under the
// lease. A change that looks at the queue (PendingIfQueued) still sends the
// fence first, in the same round trip: a statement that waited for the
// row's lock re-reads only that row, and would miss a message queued by the
// transaction it waited for; the statement after the fence starts after the
// wait and sees it.
//
// So a fence and the reserved-id inserts into its chat that follow it are
// held back (heldWrite) until the transaction's next statement: a status
// change from running of that chat takes them in; anything else sends them
// first, as they were, in order.

// heldWrite is a fence not sent yet and the inserts that followed it.
type heldWrite struct {
	lease   store.Lease
	inserts []heldInsert
}

// heldInsert is a reserved-id insert waiting behind a held fence.
type heldInsert struct {
	id        int64
	role      string
	parts     string
	usage     *string
	createdAt time.Time
}

// hold starts holding a fence, sending whatever was held before.
func (t *lazyTx) hold(l store.Lease) {
	t.unhold()
	t.held = &heldWrite{lease: l}
}

// holdInsert holds an insert behind the held fence of its chat, and
// reports false (holding nothing) when no fence of that chat is held.
func (t *lazyTx) holdInsert(chatID string, in heldInsert) bool {
	if t.held == nil || t.held.lease.ChatID != chatID {
		return false
	}
	t.held.inserts = append(t.held.inserts, in)
	return true
}

// takeHeld hands over what is held, if a status change from `from` of chat
// id can take it in; otherwise it leaves it held and returns nil.
func (t *lazyTx) takeHeld(id string, from chat.Status) *heldWrite {
	w := t.held
	if w == nil || w.lease.ChatID != id || from != chat.Running {
		return nil
	}
	t.held = nil
	return w
}

// unhold queues what is held as the statements it stands for: the fence,
// then each insert.
func (t *lazyTx) unhold() {
	w := t.held
	if w == nil {
		return
	}
	t.held = nil
	t.deferred = append(t.deferred, fenceStatement(w.lease))
	for _, in := range w.inserts {
		t.deferred = append(t.deferred, in.statement(w.lease.ChatID))
	}
}

// fenceStatement is the fence as a statement of its own: parley_fence()
// locks the chat's row if l holds it and fails otherwise.
func fenceStatement(l store.Lease) deferred {
	return deferred{
		sql:  `SELECT parley_fence($1, $2, $3)`,
		args: []any{l.ChatID, l.WorkerID, l.Generation},
		check: func(_ pgconn.CommandTag, err error) error {
			var pe *pgconn.PgError
			switch {
			case errors.As(err, &pe) && pe.Code == leaseLost:
				return leaseLostError(l)
			case err != nil:
				return fmt.Errorf("fence chat %s: %w", l.ChatID, err)
			}
			return nil
		},
	}
}

// statement is the insert as a statement of its own.
func (in heldInsert) statement(chatID string) deferred {
	return deferred{
		sql:  insertMessageSQL,
		args: []any{in.id, chatID, in.role, in.parts, in.createdAt, in.usage},
		check: func(tag pgconn.CommandTag, err error) error {
			if err == nil && tag.RowsAffected() == 0 {
				err = store.ErrNotFound // the CTE found no such chat
			}
			if err != nil {
				return fmt.Errorf("insert message into chat %s: %w", chatID, classify(err))
			}
			return nil
		},
	}
}

// leaseLostError is the error of a write whose fence found the lease gone.
func leaseLostError(l store.Lease) error {
	return fmt.Errorf("fence chat %s (worker %s, generation %d): %w", l.ChatID, l.WorkerID, l.Generation, store.ErrLeaseLost)
}

// finalWrite sends a held fence, its inserts and the status change tr
// (arguments args, of transitionArgs) as one statement, after the fence of
// its own when tr looks at the queue, in one round trip. No row back means
// the lease did not hold: nothing was written.
func (t *tx) finalWrite(ctx context.Context, w *heldWrite, args []any, tr store.Transition) (chat.Chat, error) {
	n := len(w.inserts)
	ids, roles, parts := make([]int64, n), make([]string, n), make([]string, n)
	usages, times := make([]*string, n), make([]time.Time, n)
	for i, in := range w.inserts {
		ids[i], roles[i], parts[i], usages[i], times[i] = in.id, in.role, in.parts, in.usage, in.createdAt
	}
	if tr.PendingIfQueued {
		// Lock first, in a statement of its own (see above).
		t.lazy.deferred = append(t.lazy.deferred, fenceStatement(w.lease))
	}
	args = append(args, w.lease.WorkerID, w.lease.Generation, ids, roles, parts, usages, times)
	c, err := scanChat(t.q.QueryRow(ctx, `WITH u AS (
			UPDATE chats SET `+transitionSet+`
			WHERE id = $1 AND status = $2 AND worker_id = $12 AND lease_generation = $13
			RETURNING `+chatColumns+`),
		m AS (INSERT INTO messages (id, chat_id, role, parts, usage, created_at) OVERRIDING SYSTEM VALUE
			SELECT v.id, u.id, v.role, v.parts::json, v.usage::json, v.created_at
			FROM u, unnest($14::bigint[], $15::text[], $16::text[], $17::text[], $18::timestamptz[])
				AS v(id, role, parts, usage, created_at))
		SELECT `+chatColumns+` FROM u`, args...))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return chat.Chat{}, leaseLostError(w.lease)
	case errors.Is(err, store.ErrLeaseLost): // the fence sent first
		return chat.Chat{}, err
	}
	if err != nil {
		return chat.Chat{}, fmt.Errorf("insert %d messages into chat %s and change it %s -> %s: %w", n, w.lease.ChatID, tr.From, tr.To, classify(err))
	}
	return c, nil
}
