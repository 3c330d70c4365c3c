package postgres

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/internal/pubsub"
)

const (
	// notifyLimit is the largest notification sent inline. PostgreSQL refuses
	// payloads of 8000 bytes or more; the margin leaves room for future
	// fields.
	notifyLimit = 7500
	// maxTopicLen keeps a notification that refers to a stored payload well
	// under notifyLimit: the topic is its only part of unbounded size.
	maxTopicLen = 4096
)

// note is the JSON text of one notification: the messages of one
// publication, in order, as many as fit (a publication too big for one
// note takes several). Topic and payload are bytes, which JSON carries as
// base64, so any value is valid NOTIFY text.
type note struct {
	// Origin must stay the first field: a replica knows its own
	// notifications by their first bytes (PubSub.ownPrefix).
	Origin string `json:"o"`
	Msgs   []item `json:"m"`
}

// item is one message of a note.
type item struct {
	Topic   []byte `json:"t"`
	Payload []byte `json:"p,omitempty"`
	// Ref, when set, is the id of the pubsub_payloads row that holds the
	// payload, because it did not fit in a notification.
	Ref int64 `json:"r,omitempty"`
}

// storeFunc stores a payload too large to be sent inline and returns its
// pubsub_payloads id.
type storeFunc func(ctx context.Context, payload []byte) (int64, error)

// RowQuerier runs a query for one row: a pool, a connection, a transaction.
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// StorePayload stores, through q, a payload too large for a notification in
// the pubsub_payloads table and returns its id: on the pool for a publish of
// its own, in the transaction for one that travels with a commit (the
// PostgreSQL store's pubsub.Outbox).
func StorePayload(ctx context.Context, q RowQuerier, payload []byte) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, "INSERT INTO pubsub_payloads (payload) VALUES ($1) RETURNING id", payload).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store notification payload (%d bytes): %w", len(payload), err)
	}
	return id, nil
}

// storePayload stores a payload on a connection of the pool.
func (p *PubSub) storePayload(ctx context.Context, payload []byte) (int64, error) {
	return StorePayload(ctx, p.pool, payload)
}

// framePrefix is how the text of every note from origin begins.
func framePrefix(origin string) string { return `{"o":"` + origin + `",` }

// notes returns the notification texts of msgs: each message in order,
// packed into as few notes as fit under notifyLimit. A payload too large for
// a note of its own is stored with store first, and its note refers to it.
func (p *PubSub) notes(ctx context.Context, msgs []pubsub.Message, store storeFunc) ([]string, error) {
	head := framePrefix(p.origin) + `"m":[`
	const tail = `]}`
	var (
		notes []string
		cur   []byte // the note being filled: head, then items
		n     int    // items in cur
	)
	flush := func() {
		if n > 0 {
			notes = append(notes, string(append(cur, tail...)))
		}
		cur, n = append(cur[:0:0], head...), 0
	}
	flush()
	for _, m := range msgs {
		if len(m.Topic) > maxTopicLen {
			return nil, fmt.Errorf("publish: topic of %d bytes is longer than %d", len(m.Topic), maxTopicLen)
		}
		it := item{Topic: []byte(m.Topic), Payload: m.Payload}
		b, err := p.encodeItem(ctx, it, len(head)+len(tail), store)
		if err != nil {
			return nil, fmt.Errorf("publish on %q: %w", m.Topic, err)
		}
		if n > 0 && len(cur)+1+len(b)+len(tail) > notifyLimit {
			flush()
		}
		if n > 0 {
			cur = append(cur, ',')
		}
		cur = append(cur, b...)
		n++
	}
	flush()
	return notes, nil
}

// encodeItem returns the JSON of it, which must fit in a note beside room
// bytes of its frame: a payload too large for that is stored with store and
// referred to.
func (p *PubSub) encodeItem(ctx context.Context, it item, room int, store storeFunc) ([]byte, error) {
	// A payload whose base64 alone is over the limit needs no trial encoding.
	if base64.StdEncoding.EncodedLen(len(it.Payload))+room <= notifyLimit {
		b, err := json.Marshal(it)
		if err != nil {
			return nil, fmt.Errorf("encode notification: %w", err)
		}
		if len(b)+room <= notifyLimit {
			return b, nil
		}
	}
	ref, err := store(ctx, it.Payload)
	if err != nil {
		return nil, err // StorePayload says what failed
	}
	it.Payload, it.Ref = nil, ref
	b, err := json.Marshal(it)
	if err != nil {
		return nil, fmt.Errorf("encode notification: %w", err)
	}
	return b, nil
}

// fetch returns a payload stored by another replica.
func (p *PubSub) fetch(ctx context.Context, id int64) ([]byte, error) {
	var payload []byte
	err := p.pool.QueryRow(ctx, "SELECT payload FROM pubsub_payloads WHERE id = $1", id).Scan(&payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("fetch large payload %d: expired or deleted", id)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch large payload %d: %w", id, err)
	}
	return payload, nil
}
