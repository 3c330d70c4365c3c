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

func (r reader) ListMessages(ctx context.Context, chatID string, after int64, limit int) ([]chat.Message, error) {
	return r.listMessages(ctx, "list messages", `SELECT `+dbutil.MessageColumns+` FROM messages
		WHERE chat_id = ? AND id > ? AND superseded = 0 ORDER BY id LIMIT ?`, chatID, after, limit)
}

func (r reader) ListEveryMessage(ctx context.Context, chatID string, after int64, limit int) ([]chat.Message, error) {
	return r.listMessages(ctx, "list every message", `SELECT `+dbutil.MessageColumns+` FROM messages
		WHERE chat_id = ? AND id > ? ORDER BY id LIMIT ?`, chatID, after, limit)
}

// listMessages runs a page query of a chat's messages, naming the
// operation op in errors.
func (r reader) listMessages(ctx context.Context, op, query, chatID string, after int64, limit int) ([]chat.Message, error) {
	msgs, err := queryAll(ctx, r.q, dbutil.ScanMessage, query, chatID, after, dbutil.PageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("%s of chat %s: %w", op, chatID, err)
	}
	return msgs, nil
}

func (r reader) LastTurn(ctx context.Context, chatID string) ([]chat.Message, error) {
	// The last assistant message is found walking the (chat_id, id) index
	// backwards, so a long history costs nothing more.
	msgs, err := queryAll(ctx, r.q, dbutil.ScanMessage, `SELECT `+dbutil.MessageColumns+` FROM messages
		WHERE chat_id = ? AND superseded = 0 AND id >= coalesce((SELECT id FROM messages
			WHERE chat_id = ? AND role = 'assistant' AND superseded = 0 ORDER BY id DESC LIMIT 1), 0)
		ORDER BY id LIMIT ?`, chatID, chatID, store.MaxPageSize)
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
	msgs, err := queryAll(ctx, r.q, dbutil.ScanMessage, `WITH t AS MATERIALIZED (
			SELECT value AS chat_id, coalesce((SELECT compaction_through FROM messages
				WHERE chat_id = value AND compaction_through IS NOT NULL AND superseded = 0
				ORDER BY id DESC LIMIT 1), 0) AS through
			FROM json_each(?)),
		c AS MATERIALIZED (
			SELECT chat_id, through, coalesce((SELECT id FROM messages
				WHERE chat_id = t.chat_id AND id > t.through AND superseded = 0
				ORDER BY id LIMIT 1 OFFSET ?), 9223372036854775807) AS last
			FROM t)
		SELECT m.id, m.chat_id, m.role, m.parts, m.usage, m.created_at, m.superseded, m.parent_id
		FROM c JOIN messages m ON m.chat_id = c.chat_id AND m.id > c.through AND m.id <= c.last
		WHERE m.superseded = 0
		ORDER BY m.chat_id, m.id`, string(ids), limit-1)
	if err != nil {
		return nil, fmt.Errorf("messages since compaction of %d chats: %w", len(chatIDs), err)
	}
	return dbutil.ByChat(msgs), nil
}

func (r reader) ListQueued(ctx context.Context, chatID string) ([]chat.QueuedMessage, error) {
	qs, err := queryAll(ctx, r.q, dbutil.ScanQueued, `SELECT `+dbutil.QueuedColumns+` FROM queued_messages
		WHERE chat_id = ? ORDER BY id`, chatID)
	if err != nil {
		return nil, fmt.Errorf("list queued messages of chat %s: %w", chatID, err)
	}
	return qs, nil
}

func (t *tx) InsertMessage(ctx context.Context, m *chat.Message) error {
	js, err := dbutil.EncodeMessage(m)
	if err != nil {
		return fmt.Errorf("insert message into chat %s: %w", m.ChatID, err)
	}
	// The foreign key refuses a message of an unknown chat (ErrNotFound).
	now := dbutil.Now()
	if m.ID != 0 { // reserved: nothing to read back
		_, err = t.q.ExecContext(ctx, `INSERT INTO messages (id, chat_id, role, parts, usage, created_at, compaction_through)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			m.ID, m.ChatID, string(m.Role), text(js.Parts), text(js.Usage), dbutil.Micros(now), js.Through)
	} else {
		err = t.q.QueryRowContext(ctx, `INSERT INTO messages (chat_id, role, parts, usage, created_at, compaction_through)
			VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
			m.ChatID, string(m.Role), text(js.Parts), text(js.Usage), dbutil.Micros(now), js.Through).Scan(&m.ID)
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

func (t *tx) SupersedeAfter(ctx context.Context, chatID string, after int64) (int, error) {
	// Each message of the history that goes keeps the message it followed
	// (the one before it, compactions aside), read before any is marked.
	_, err := t.q.ExecContext(ctx, `UPDATE messages SET parent_id = coalesce((SELECT p.id FROM messages p
			WHERE p.chat_id = messages.chat_id AND p.id < messages.id AND p.superseded = 0
				AND p.compaction_through IS NULL ORDER BY p.id DESC LIMIT 1), 0)
		WHERE chat_id = ? AND id > ? AND superseded = 0`, chatID, after)
	var res sql.Result
	if err == nil {
		res, err = t.q.ExecContext(ctx, `UPDATE messages SET superseded = 1
			WHERE chat_id = ? AND id > ? AND superseded = 0`, chatID, after)
	}
	if err != nil {
		return 0, fmt.Errorf("supersede messages of chat %s after %d: %w", chatID, after, classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("supersede messages of chat %s after %d: %w", chatID, after, err)
	}
	return int(n), nil
}

func (r reader) MessageVersions(ctx context.Context, chatID string, id int64) ([]chat.Message, error) {
	var parent, through *int64
	err := r.q.QueryRowContext(ctx, `SELECT parent_id, compaction_through FROM messages
		WHERE chat_id = ? AND id = ?`, chatID, id).Scan(&parent, &through)
	if err = notFound(err); err != nil {
		return nil, fmt.Errorf("versions of message %d of chat %s: %w", id, chatID, err)
	}
	// A compaction is no version of anything: it is its only version.
	query, arg := `SELECT `+dbutil.MessageColumns+` FROM messages WHERE chat_id = ?1 AND id = ?2 LIMIT ?3`, id
	if through == nil {
		if parent == nil { // in the history: it follows the history's message before it
			parent = new(int64)
			err = r.q.QueryRowContext(ctx, `SELECT coalesce((SELECT id FROM messages WHERE chat_id = ? AND id < ?
				AND superseded = 0 AND compaction_through IS NULL ORDER BY id DESC LIMIT 1), 0)`, chatID, id).Scan(parent)
			if err != nil {
				return nil, fmt.Errorf("versions of message %d of chat %s: %w", id, chatID, err)
			}
		}
		// The superseded versions name their parent; the one in the
		// history, if the parent is in it, is the history's next message.
		query, arg = `SELECT * FROM (SELECT `+dbutil.MessageColumns+` FROM messages
			WHERE chat_id = ?1 AND compaction_through IS NULL AND (parent_id = ?2
				OR (id = (SELECT id FROM messages WHERE chat_id = ?1 AND id > ?2 AND superseded = 0
						AND compaction_through IS NULL ORDER BY id LIMIT 1)
					AND (?2 = 0 OR EXISTS (SELECT 1 FROM messages WHERE chat_id = ?1 AND id = ?2 AND superseded = 0))))
			ORDER BY id DESC LIMIT ?3) ORDER BY id`, *parent
	}
	msgs, err := queryAll(ctx, r.q, dbutil.ScanMessage, query, chatID, arg, store.MaxPageSize)
	if err != nil {
		return nil, fmt.Errorf("versions of message %d of chat %s: %w", id, chatID, err)
	}
	return msgs, nil
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
	err = notFound(err)
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
