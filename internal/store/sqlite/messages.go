package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// messageColumns are the columns scanMessages reads, in its order.
const messageColumns = `id, chat_id, role, parts, usage, created_at, superseded`

func (r reader) ListMessages(ctx context.Context, chatID string, after int64, limit int) ([]chat.Message, error) {
	return r.listMessages(ctx, "list messages", `SELECT `+messageColumns+` FROM messages
		WHERE chat_id = ? AND id > ? AND superseded = 0 ORDER BY id LIMIT ?`, chatID, after, limit)
}

func (r reader) ListEveryMessage(ctx context.Context, chatID string, after int64, limit int) ([]chat.Message, error) {
	return r.listMessages(ctx, "list every message", `SELECT `+messageColumns+` FROM messages
		WHERE chat_id = ? AND id > ? ORDER BY id LIMIT ?`, chatID, after, limit)
}

// listMessages runs a page query of a chat's messages, naming the
// operation op in errors.
func (r reader) listMessages(ctx context.Context, op, query, chatID string, after int64, limit int) ([]chat.Message, error) {
	rows, err := r.q.QueryContext(ctx, query, chatID, after, dbutil.PageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("%s of chat %s: %w", op, chatID, err)
	}
	msgs := []chat.Message{}
	err = scanMessages(rows, func(m chat.Message) { msgs = append(msgs, m) })
	if err != nil {
		return nil, fmt.Errorf("%s of chat %s: %w", op, chatID, err)
	}
	return msgs, nil
}

func (r reader) LastTurn(ctx context.Context, chatID string) ([]chat.Message, error) {
	// The last assistant message is found walking the (chat_id, id) index
	// backwards, so a long history costs nothing more.
	rows, err := r.q.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE chat_id = ? AND superseded = 0 AND id >= coalesce((SELECT id FROM messages
			WHERE chat_id = ? AND role = 'assistant' AND superseded = 0 ORDER BY id DESC LIMIT 1), 0)
		ORDER BY id LIMIT ?`, chatID, chatID, store.MaxPageSize)
	if err != nil {
		return nil, fmt.Errorf("last turn of chat %s: %w", chatID, err)
	}
	msgs := []chat.Message{}
	err = scanMessages(rows, func(m chat.Message) { msgs = append(msgs, m) })
	if err != nil {
		return nil, fmt.Errorf("last turn of chat %s: %w", chatID, err)
	}
	return msgs, nil
}

func (r reader) SinceCompaction(ctx context.Context, chatIDs []string, limit int) (map[string][]chat.Message, error) {
	ids, err := dbutil.CheckSinceCompaction(chatIDs, limit)
	if err != nil {
		return nil, err
	}
	// Each chat's newest compaction in force is found first, on the
	// messages_compaction partial index (the query names both terms of its
	// predicate), then its cut-off (the limit-th message after the
	// compaction's through), on the (chat_id, id) index. MATERIALIZED keeps
	// SQLite from re-running those lookups for every message.
	rows, err := r.q.QueryContext(ctx, `WITH t AS MATERIALIZED (
			SELECT value AS chat_id, coalesce((SELECT compaction_through FROM messages
				WHERE chat_id = value AND compaction_through IS NOT NULL AND superseded = 0
				ORDER BY id DESC LIMIT 1), 0) AS through
			FROM json_each(?)),
		c AS MATERIALIZED (
			SELECT chat_id, through, coalesce((SELECT id FROM messages
				WHERE chat_id = t.chat_id AND id > t.through AND superseded = 0
				ORDER BY id LIMIT 1 OFFSET ?), 9223372036854775807) AS last
			FROM t)
		SELECT m.id, m.chat_id, m.role, m.parts, m.usage, m.created_at, m.superseded
		FROM c JOIN messages m ON m.chat_id = c.chat_id AND m.id > c.through AND m.id <= c.last
		WHERE m.superseded = 0
		ORDER BY m.chat_id, m.id`, string(ids), limit-1)
	if err != nil {
		return nil, fmt.Errorf("messages since compaction of %d chats: %w", len(chatIDs), err)
	}
	byChat := map[string][]chat.Message{}
	err = scanMessages(rows, func(m chat.Message) { byChat[m.ChatID] = append(byChat[m.ChatID], m) })
	if err != nil {
		return nil, fmt.Errorf("messages since compaction of %d chats: %w", len(chatIDs), err)
	}
	return byChat, nil
}

// scanMessages reads and closes rows of messageColumns, calling fn with
// each.
func scanMessages(rows *sql.Rows, fn func(chat.Message)) error {
	defer rows.Close()
	for rows.Next() {
		var (
			m            chat.Message
			parts, usage []byte
			created      int64
		)
		if err := rows.Scan(&m.ID, &m.ChatID, &m.Role, &parts, &usage, &created, &m.Superseded); err != nil {
			return err
		}
		var err error
		if m.Parts, err = dbutil.DecodeParts(parts); err != nil {
			return fmt.Errorf("message %d: %w", m.ID, err)
		}
		if m.Usage, err = dbutil.DecodeUsage(usage); err != nil {
			return fmt.Errorf("message %d: %w", m.ID, err)
		}
		m.CreatedAt = dbutil.FromMicros(created)
		fn(m)
	}
	return rows.Err()
}

func (r reader) ListQueued(ctx context.Context, chatID string) ([]chat.QueuedMessage, error) {
	rows, err := r.q.QueryContext(ctx, `SELECT id, chat_id, parts, response_format, created_at FROM queued_messages
		WHERE chat_id = ? ORDER BY id`, chatID)
	if err != nil {
		return nil, fmt.Errorf("list queued messages of chat %s: %w", chatID, err)
	}
	defer rows.Close()
	qs := []chat.QueuedMessage{}
	for rows.Next() {
		var (
			q             chat.QueuedMessage
			parts, format []byte
			created       int64
		)
		if err := rows.Scan(&q.ID, &q.ChatID, &parts, &format, &created); err != nil {
			return nil, fmt.Errorf("list queued messages of chat %s: %w", chatID, err)
		}
		if q.Parts, err = dbutil.DecodeParts(parts); err != nil {
			return nil, fmt.Errorf("queued message %d: %w", q.ID, err)
		}
		if q.ResponseFormat, err = dbutil.DecodeFormat(format); err != nil {
			return nil, fmt.Errorf("queued message %d: %w", q.ID, err)
		}
		q.CreatedAt = dbutil.FromMicros(created)
		qs = append(qs, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queued messages of chat %s: %w", chatID, err)
	}
	return qs, nil
}

func (t *tx) InsertMessage(ctx context.Context, m *chat.Message) error {
	parts, err := dbutil.EncodeParts(m.Parts)
	if err != nil {
		return fmt.Errorf("insert message into chat %s: %w", m.ChatID, err)
	}
	usage, err := dbutil.EncodeNullable(m.Usage)
	if err != nil {
		return fmt.Errorf("insert message into chat %s: encode usage: %w", m.ChatID, err)
	}
	// The foreign key refuses a message of an unknown chat (ErrNotFound).
	now := dbutil.Now()
	through := dbutil.CompactionThrough(m.Parts)
	if m.ID != 0 { // reserved: nothing to read back
		_, err = t.q.ExecContext(ctx, `INSERT INTO messages (id, chat_id, role, parts, usage, created_at, compaction_through)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			m.ID, m.ChatID, string(m.Role), text(parts), text(usage), dbutil.Micros(now), through)
	} else {
		err = t.q.QueryRowContext(ctx, `INSERT INTO messages (chat_id, role, parts, usage, created_at, compaction_through)
			VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
			m.ChatID, string(m.Role), text(parts), text(usage), dbutil.Micros(now), through).Scan(&m.ID)
	}
	if err != nil {
		return fmt.Errorf("insert message into chat %s: %w", m.ChatID, classify(err))
	}
	if err := t.useFiles(ctx, m.ChatID, m.Parts); err != nil {
		return fmt.Errorf("insert message into chat %s: %w", m.ChatID, err)
	}
	m.CreatedAt = now
	return nil
}

// ReplaceParts rewrites the message's parts, and its compaction_through
// with them.
func (t *tx) ReplaceParts(ctx context.Context, chatID string, id int64, parts []chat.Part) error {
	enc, err := dbutil.EncodeParts(parts)
	if err != nil {
		return fmt.Errorf("replace parts of message %d: %w", id, err)
	}
	res, err := t.q.ExecContext(ctx, `UPDATE messages SET parts = ?, compaction_through = ?
		WHERE id = ? AND chat_id = ? AND superseded = 0`, text(enc), dbutil.CompactionThrough(parts), id, chatID)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("replace parts of message %d of chat %s: %w", id, chatID, err)
	}
	if err := t.useFiles(ctx, chatID, parts); err != nil {
		return fmt.Errorf("replace parts of message %d of chat %s: %w", id, chatID, err)
	}
	return nil
}

func (t *tx) SupersedeAfter(ctx context.Context, chatID string, after int64) (int, error) {
	res, err := t.q.ExecContext(ctx, `UPDATE messages SET superseded = 1
		WHERE chat_id = ? AND id > ? AND superseded = 0`, chatID, after)
	if err != nil {
		return 0, fmt.Errorf("supersede messages of chat %s after %d: %w", chatID, after, classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("supersede messages of chat %s after %d: %w", chatID, after, err)
	}
	return int(n), nil
}

// AddUsage adds u to the chat and to its owner's usage ledger (nothing to
// the ledger when u is zero).
func (t *tx) AddUsage(ctx context.Context, chatID string, u chat.Usage) error {
	now := dbutil.Now()
	var owner string
	err := t.q.QueryRowContext(ctx, `UPDATE chats SET usage_input_tokens = usage_input_tokens + ?,
		usage_output_tokens = usage_output_tokens + ?, usage_cost_micros = usage_cost_micros + ?,
		version = version + 1, updated_at = ? WHERE id = ? RETURNING owner`,
		u.InputTokens, u.OutputTokens, u.CostMicros, dbutil.Micros(now), chatID).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err == nil {
		err = addToLedger(ctx, t.q, owner, now, u)
	}
	if err != nil {
		return fmt.Errorf("add usage to chat %s: %w", chatID, err)
	}
	return nil
}

func (t *tx) InsertQueued(ctx context.Context, q *chat.QueuedMessage) error {
	parts, err := dbutil.EncodeParts(q.Parts)
	if err != nil {
		return fmt.Errorf("queue message for chat %s: %w", q.ChatID, err)
	}
	format, err := dbutil.EncodeNullable(q.ResponseFormat)
	if err != nil {
		return fmt.Errorf("queue message for chat %s: %w", q.ChatID, err)
	}
	now := dbutil.Now()
	err = t.q.QueryRowContext(ctx, `INSERT INTO queued_messages (chat_id, parts, response_format, created_at)
		SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM chats WHERE id = ?) RETURNING id`,
		q.ChatID, text(parts), text(format), dbutil.Micros(now), q.ChatID).Scan(&q.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("queue message for chat %s: %w", q.ChatID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("queue message for chat %s: %w", q.ChatID, classify(err))
	}
	if err := t.useFiles(ctx, q.ChatID, q.Parts); err != nil {
		return fmt.Errorf("queue message for chat %s: %w", q.ChatID, err)
	}
	q.CreatedAt = now
	return nil
}

func (t *tx) DeleteQueued(ctx context.Context, id int64) error {
	res, err := t.q.ExecContext(ctx, `DELETE FROM queued_messages WHERE id = ?`, id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("delete queued message %d: %w", id, err)
	}
	return nil
}
