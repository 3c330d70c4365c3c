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
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

func (r reader) ListMessages(ctx context.Context, chatID string, after int64, limit int) ([]chat.Message, error) {
	return r.listMessages(ctx, "list messages", `SELECT `+dbutil.MessageColumns+` FROM messages
		WHERE chat_id = $1 AND id > $2 AND NOT superseded ORDER BY id LIMIT $3`, chatID, after, limit)
}

func (r reader) ListEveryMessage(ctx context.Context, chatID string, after int64, limit int) ([]chat.Message, error) {
	return r.listMessages(ctx, "list every message", `SELECT `+dbutil.MessageColumns+` FROM messages
		WHERE chat_id = $1 AND id > $2 ORDER BY id LIMIT $3`, chatID, after, limit)
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
		WHERE chat_id = $1 AND NOT superseded AND id >= coalesce((SELECT id FROM messages
			WHERE chat_id = $1 AND role = 'assistant' AND NOT superseded ORDER BY id DESC LIMIT 1), 0)
		ORDER BY id LIMIT $2`, chatID, store.MaxPageSize)
	if err != nil {
		return nil, fmt.Errorf("last turn of chat %s: %w", chatID, err)
	}
	return msgs, nil
}

func (r reader) SinceCompaction(ctx context.Context, chatIDs []string, limit int) (map[string][]chat.Message, error) {
	if _, err := dbutil.CheckSinceCompaction(chatIDs, limit); err != nil {
		return nil, err
	}
	// For each chat, its newest compaction in force is found on the
	// messages_compaction partial index (the query names both terms of its
	// predicate), then the messages after its through on the (chat_id, id)
	// index: the row comparison only that index can serve, so the planner
	// never walks the primary key from through, across every chat's
	// messages, instead.
	msgs, err := queryAll(ctx, r.q, dbutil.ScanMessage, `SELECT m.id, m.chat_id, m.role, m.parts, m.usage, m.created_at, m.superseded, m.parent_id
		FROM unnest($1::text[]) AS c(id)
		CROSS JOIN LATERAL (SELECT coalesce((SELECT compaction_through FROM messages
			WHERE chat_id = c.id AND compaction_through IS NOT NULL AND NOT superseded
			ORDER BY id DESC LIMIT 1), 0) AS through) t
		CROSS JOIN LATERAL (
			SELECT `+dbutil.MessageColumns+` FROM messages
			WHERE chat_id = c.id AND (chat_id, id) > (c.id, t.through) AND NOT superseded
			ORDER BY chat_id, id LIMIT $2) m
		ORDER BY m.id`, chatIDs, limit)
	if err != nil {
		return nil, fmt.Errorf("messages since compaction of %d chats: %w", len(chatIDs), err)
	}
	return dbutil.ByChat(msgs), nil
}

func (r reader) ListQueued(ctx context.Context, chatID string) ([]chat.QueuedMessage, error) {
	qs, err := queryAll(ctx, r.q, dbutil.ScanQueued, `SELECT `+dbutil.QueuedColumns+` FROM queued_messages
		WHERE chat_id = $1 ORDER BY id`, chatID)
	if err != nil {
		return nil, fmt.Errorf("list queued messages of chat %s: %w", chatID, err)
	}
	return qs, nil
}

// lockForAppend locks the chat's row against other appends until the
// transaction ends (FOR NO KEY UPDATE: plain foreign-key checks still pass),
// so that ids, taken from one sequence for all chats, are handed out in
// commit order within a chat and a reader paging with "after" never skips an
// id that commits late. It answers store.ErrNotFound for a missing chat.
func (t *tx) lockForAppend(ctx context.Context, chatID string) error {
	var one int
	err := t.q.QueryRow(ctx, `SELECT 1 FROM chats WHERE id = $1 FOR NO KEY UPDATE`, chatID).Scan(&one)
	return notFound(err)
}

func (t *tx) InsertMessage(ctx context.Context, m *chat.Message) error {
	js, err := dbutil.EncodeMessage(m)
	if err != nil {
		return fmt.Errorf("insert message into chat %s: %w", m.ChatID, err)
	}
	now := dbutil.Now()
	m.CreatedAt = now
	if m.ID != 0 { // reserved with ReserveMessageIDs
		// The id is known: nothing to wait for, so the insert travels with
		// the transaction's next round trip.
		chatID := m.ChatID
		t.lazy.deferExec(func(tag pgconn.CommandTag, err error) error {
			if err == nil && tag.RowsAffected() == 0 {
				err = store.ErrNotFound // the CTE found no such chat
			}
			if err != nil {
				return fmt.Errorf("insert message into chat %s: %w", chatID, classify(err))
			}
			return nil
		}, insertMessageSQL, m.ID, chatID, string(m.Role), string(js.Parts), now, js.Usage, js.Through)
		t.useFiles(m.ChatID, m.Parts)
		return nil
	}
	err = t.q.QueryRow(ctx, insertMessageSQL+` RETURNING id`, nil, m.ChatID, string(m.Role), string(js.Parts), now, js.Usage, js.Through).Scan(&m.ID)
	if err != nil {
		m.CreatedAt = time.Time{}
		if errors.Is(err, pgx.ErrNoRows) {
			err = store.ErrNotFound // the CTE found no such chat
		}
		return fmt.Errorf("insert message into chat %s: %w", m.ChatID, classify(err))
	}
	t.useFiles(m.ChatID, m.Parts)
	return nil
}

// insertMessageSQL inserts a message, $1 its id or NULL for the next one,
// $7 its compaction_through.
// The CTE takes lockForAppend's row lock (no new row version: the chat's
// row is not changed); no row inserted means no such chat.
const insertMessageSQL = `WITH c AS (SELECT id FROM chats WHERE id = $2 FOR NO KEY UPDATE)
	INSERT INTO messages (id, chat_id, role, parts, usage, created_at, compaction_through) OVERRIDING SYSTEM VALUE
	SELECT COALESCE($1::bigint, nextval(pg_get_serial_sequence('messages', 'id'))), c.id, $3, $4::json, $6::json, $5, $7::bigint FROM c`

func (t *tx) SupersedeAfter(ctx context.Context, chatID string, after int64) (int, error) {
	// Each message of the history that goes keeps the message it followed
	// (the one before it, compactions aside): the subquery reads the
	// messages as they were before the statement.
	tag, err := t.q.Exec(ctx, `UPDATE messages m SET superseded = true, parent_id = coalesce((SELECT p.id FROM messages p
			WHERE p.chat_id = m.chat_id AND p.id < m.id AND NOT p.superseded
				AND p.compaction_through IS NULL ORDER BY p.id DESC LIMIT 1), 0)
		WHERE m.chat_id = $1 AND m.id > $2 AND NOT m.superseded`, chatID, after)
	if err != nil {
		return 0, fmt.Errorf("supersede messages of chat %s after %d: %w", chatID, after, classify(err))
	}
	return int(tag.RowsAffected()), nil
}

func (r reader) MessageVersions(ctx context.Context, chatID string, id int64) ([]chat.Message, error) {
	var parent, through *int64
	err := r.q.QueryRow(ctx, `SELECT parent_id, compaction_through FROM messages
		WHERE chat_id = $1 AND id = $2`, chatID, id).Scan(&parent, &through)
	if err = notFound(err); err != nil {
		return nil, fmt.Errorf("versions of message %d of chat %s: %w", id, chatID, err)
	}
	// A compaction is no version of anything: it is its only version.
	query, arg := `SELECT `+dbutil.MessageColumns+` FROM messages WHERE chat_id = $1 AND id = $2 LIMIT $3`, id
	if through == nil {
		if parent == nil { // in the history: it follows the history's message before it
			parent = new(int64)
			err = r.q.QueryRow(ctx, `SELECT coalesce((SELECT id FROM messages WHERE chat_id = $1 AND id < $2
				AND NOT superseded AND compaction_through IS NULL ORDER BY id DESC LIMIT 1), 0)`, chatID, id).Scan(parent)
			if err != nil {
				return nil, fmt.Errorf("versions of message %d of chat %s: %w", id, chatID, err)
			}
		}
		// The superseded versions name their parent; the one in the
		// history, if the parent is in it, is the history's next message.
		query, arg = `SELECT * FROM (SELECT `+dbutil.MessageColumns+` FROM messages
			WHERE chat_id = $1 AND compaction_through IS NULL AND (parent_id = $2
				OR (id = (SELECT id FROM messages WHERE chat_id = $1 AND id > $2 AND NOT superseded
						AND compaction_through IS NULL ORDER BY id LIMIT 1)
					AND ($2 = 0 OR EXISTS (SELECT 1 FROM messages WHERE chat_id = $1 AND id = $2 AND NOT superseded))))
			ORDER BY id DESC LIMIT $3) v ORDER BY id`, *parent
	}
	msgs, err := queryAll(ctx, r.q, dbutil.ScanMessage, query, chatID, arg, store.MaxPageSize)
	if err != nil {
		return nil, fmt.Errorf("versions of message %d of chat %s: %w", id, chatID, err)
	}
	return msgs, nil
}

// AddUsage adds u to the chat and, in the same statement, to its owner's
// usage ledger (nothing to the ledger when u is zero).
func (t *tx) AddUsage(ctx context.Context, chatID string, u chat.Usage) error {
	q := `UPDATE chats SET usage_input_tokens = usage_input_tokens + $2,
		usage_output_tokens = usage_output_tokens + $3, usage_cost_micros = usage_cost_micros + $4,
		version = version + 1, updated_at = $5 WHERE id = $1 RETURNING owner`
	if u != (chat.Usage{}) {
		q = withLedger(q, "owner", "$2::bigint", "$3::bigint", "$4::bigint")
	}
	var owner string
	err := t.q.QueryRow(ctx, q, chatID, u.InputTokens, u.OutputTokens, u.CostMicros, dbutil.Now()).Scan(&owner)
	if err = notFound(err); err != nil {
		return fmt.Errorf("add usage to chat %s: %w", chatID, err)
	}
	return nil
}

func (t *tx) InsertQueued(ctx context.Context, q *chat.QueuedMessage) error {
	parts, err := dbutil.EncodeParts(q.Parts)
	if err != nil {
		return fmt.Errorf("queue message for chat %s: %w", q.ChatID, err)
	}
	if err := t.lockForAppend(ctx, q.ChatID); err != nil {
		return fmt.Errorf("queue message for chat %s: %w", q.ChatID, err)
	}
	format, err := dbutil.EncodeNullable(q.ResponseFormat)
	if err != nil {
		return fmt.Errorf("queue message for chat %s: %w", q.ChatID, err)
	}
	now := dbutil.Now()
	err = t.q.QueryRow(ctx, `INSERT INTO queued_messages (chat_id, parts, response_format, created_at)
		VALUES ($1, $2, $3, $4) RETURNING id`, q.ChatID, parts, textOf(format), now).Scan(&q.ID)
	if err != nil {
		return fmt.Errorf("queue message for chat %s: %w", q.ChatID, classify(err))
	}
	t.useFiles(q.ChatID, q.Parts)
	q.CreatedAt = now
	return nil
}

func (t *tx) DeleteQueued(ctx context.Context, id int64) error {
	tag, err := t.q.Exec(ctx, `DELETE FROM queued_messages WHERE id = $1`, id)
	if err := oneRow(tag, err); err != nil {
		return fmt.Errorf("delete queued message %d: %w", id, err)
	}
	return nil
}
