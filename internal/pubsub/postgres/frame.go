package postgres

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
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

// frame is the JSON text of one notification. Topic and payload are bytes,
// which JSON carries as base64, so any value is valid NOTIFY text.
type frame struct {
	// Origin must stay the first field: a replica knows its own
	// notifications by their first bytes (PubSub.ownPrefix).
	Origin  string `json:"o"`
	Topic   []byte `json:"t"`
	Payload []byte `json:"p,omitempty"`
	// Ref, when set, is the id of the pubsub_payloads row that holds the
	// payload, because it did not fit in a notification.
	Ref int64 `json:"r,omitempty"`
}

// storeFunc stores a payload too large to be sent inline and returns its
// pubsub_payloads id.
type storeFunc func(ctx context.Context, payload []byte) (int64, error)

// storePayload stores a payload on a connection of the pool.
func (p *PubSub) storePayload(ctx context.Context, payload []byte) (int64, error) {
	var id int64
	err := p.pool.QueryRow(ctx, "INSERT INTO pubsub_payloads (payload) VALUES ($1) RETURNING id", payload).Scan(&id)
	return id, err
}

// framePrefix is how the text of every frame from origin begins.
func framePrefix(origin string) string { return `{"o":"` + origin + `",` }

// notification returns the text to notify for a message, storing the payload
// with store first if it is too large to be sent inline.
func (p *PubSub) notification(ctx context.Context, topic string, payload []byte, store storeFunc) (string, error) {
	f := frame{Origin: p.origin, Topic: []byte(topic), Payload: payload}
	// A payload whose base64 alone is over the limit needs no trial encoding.
	if base64.StdEncoding.EncodedLen(len(payload)) <= notifyLimit {
		b, err := json.Marshal(f)
		if err != nil {
			return "", fmt.Errorf("encode notification: %w", err)
		}
		if len(b) <= notifyLimit {
			return string(b), nil
		}
	}
	var err error
	if f.Ref, err = store(ctx, payload); err != nil {
		return "", fmt.Errorf("store large payload (%d bytes): %w", len(payload), err)
	}
	f.Payload = nil
	b, err := json.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("encode notification: %w", err)
	}
	return string(b), nil
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
