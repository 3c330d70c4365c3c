package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

func (r reader) GetChat(ctx context.Context, id string) (chat.Chat, error) {
	return r.getChat(ctx, "get chat", `SELECT `+dbutil.ChatColumns+` FROM chats WHERE id = $1`, id)
}

// getChat reads one chat with query, naming the operation op in errors.
func (r reader) getChat(ctx context.Context, op, query, id string) (chat.Chat, error) {
	c, err := dbutil.ScanChat(r.q.QueryRow(ctx, query, id))
	if err != nil {
		return chat.Chat{}, fmt.Errorf("%s %s: %w", op, id, notFound(err))
	}
	return c, nil
}

func (r reader) ListChats(ctx context.Context, q store.ChatQuery) (store.ChatPage, error) {
	limit := dbutil.PageLimit(q.Limit)
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where = append(where, "owner = "+arg(q.Owner))
	if len(q.Statuses) > 0 {
		ss := make([]string, len(q.Statuses))
		for i, s := range q.Statuses {
			ss[i] = string(s)
		}
		where = append(where, "status = ANY("+arg(ss)+")")
	}
	if len(q.Labels) > 0 {
		labels, err := dbutil.EncodeLabels(q.Labels)
		if err != nil {
			return store.ChatPage{}, fmt.Errorf("list chats: %w", err)
		}
		where = append(where, "labels @> "+arg(string(labels))+"::jsonb")
	}
	if q.Archived != nil {
		where = append(where, "archived = "+arg(*q.Archived))
	}
	if q.Cursor != "" {
		at, id, err := dbutil.DecodeCursor(q.Cursor)
		if err != nil {
			return store.ChatPage{}, fmt.Errorf("list chats: %w", err)
		}
		where = append(where, "(created_at, id) < ("+arg(at)+", "+arg(id)+")")
	}
	chats, err := queryAll(ctx, r.q, dbutil.ScanChat, `SELECT `+dbutil.ChatColumns+` FROM chats WHERE `+strings.Join(where, " AND ")+
		` ORDER BY created_at DESC, id DESC LIMIT `+arg(limit+1), args...)
	if err != nil {
		return store.ChatPage{}, fmt.Errorf("list chats of %s: %w", q.Owner, err)
	}
	return dbutil.ChatPage(chats, limit), nil
}

// LockChat reads the chat with SELECT ... FOR UPDATE: until the transaction
// ends, other transactions that lock or update the chat wait.
func (t *tx) LockChat(ctx context.Context, id string) (chat.Chat, error) {
	return t.getChat(ctx, "lock chat", `SELECT `+dbutil.ChatColumns+` FROM chats WHERE id = $1 FOR UPDATE`, id)
}

// Now reads now(): the start of the transaction, on the clock deadlines
// are set and expire by.
func (t *tx) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := t.q.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read the database's clock: %w", err)
	}
	return now.UTC(), nil
}

func (t *tx) InsertChat(ctx context.Context, c *chat.Chat) error {
	if err := dbutil.CheckNewChat(c); err != nil {
		return fmt.Errorf("insert chat: %w", err)
	}
	js, err := dbutil.EncodeChat(c)
	if err != nil {
		return fmt.Errorf("insert chat %s: %w", c.ID, err)
	}
	now := dbutil.Now()
	// Neither a duplicate id nor an unknown owner raises an error, which
	// would abort the whole transaction: the insert just does nothing, and
	// insertRefused says why.
	tag, err := t.q.Exec(ctx, `INSERT INTO chats (`+dbutil.ChatColumns+`)
		SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::json, $8::jsonb,
			$9::boolean, $10::json, $11::bigint, $12::bigint, $13::bigint, $14::bigint, $15::timestamptz,
			$16::text, $17::bigint, $18::timestamptz, $19::boolean, $20::timestamptz, $20::timestamptz, 1, 0, $21::json, $22::json,
			$23::boolean, $24::text, $25::integer, $26::integer, $27::text, $28::text, $29::integer
		WHERE EXISTS (SELECT 1 FROM owners WHERE name = $2)
		ON CONFLICT (id) DO NOTHING`,
		c.ID, c.Owner, c.Title, c.Model, c.SystemPrompt, string(c.Status), js.DynamicTools, string(js.Labels),
		c.Archived, js.LastError, c.Usage.InputTokens, c.Usage.OutputTokens, c.Usage.CostMicros,
		c.ToolResultTimeout.Milliseconds(), dbutil.UTCPtr(c.ActionDeadline), c.WorkerID, c.LeaseGeneration,
		dbutil.UTCPtr(c.LeaseExpiresAt), c.InterruptRequested, now, js.Tools, js.Approve, c.CompactRequested, c.Agent, dbutil.NullVersion(c.AgentVersion), c.MaxSteps,
		textOf(js.ResponseFormat), textOf(js.TurnFormat), c.OutputRepairs)
	if err != nil {
		return fmt.Errorf("insert chat %s: %w", c.ID, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return t.insertRefused(ctx, "chat", c.ID, "chats", c.Owner)
	}
	dbutil.Inserted(c, now)
	return nil
}

// insertRefused explains an INSERT ... WHERE EXISTS (owner) ON CONFLICT DO
// NOTHING that inserted nothing: the key exists (ErrExists), or the owner
// does not (ErrNotFound).
func (t *tx) insertRefused(ctx context.Context, what, id, table, owner string) error {
	var exists bool
	err := t.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE id = $1)`, id).Scan(&exists)
	return dbutil.InsertRefused(what, id, owner, exists, err)
}

func (t *tx) UpdateChatMeta(ctx context.Context, c *chat.Chat) error {
	labels, err := dbutil.EncodeLabels(c.Labels)
	if err != nil {
		return fmt.Errorf("update chat %s: %w", c.ID, err)
	}
	now := dbutil.Now()
	err = t.q.QueryRow(ctx, `UPDATE chats SET title = $2, labels = $3::jsonb, archived = $4, version = version + 1, updated_at = $5
		WHERE id = $1 RETURNING version`, c.ID, c.Title, string(labels), c.Archived, now).Scan(&c.Version)
	if err = notFound(err); err != nil {
		return fmt.Errorf("update chat %s: %w", c.ID, err)
	}
	c.UpdatedAt = now
	return nil
}

func (t *tx) TransitionChat(ctx context.Context, id string, tr store.Transition) (chat.Chat, error) {
	if err := dbutil.CheckTransition(tr); err != nil {
		return chat.Chat{}, fmt.Errorf("transition chat %s: %w", id, err)
	}
	args, err := transitionArgs(id, tr)
	if err != nil {
		return chat.Chat{}, err
	}
	q := `UPDATE chats SET ` + transitionSet + ` WHERE id = $1 AND status = $2 RETURNING ` + dbutil.ChatColumns
	if tr.AddUsage != (chat.Usage{}) {
		q = withLedger(q, dbutil.ChatColumns, "$8::bigint", "$9::bigint", "$10::bigint")
	}
	c, err := dbutil.ScanChat(t.q.QueryRow(ctx, q, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return chat.Chat{}, t.statusConflict(ctx, id, tr)
	}
	if err != nil {
		return chat.Chat{}, fmt.Errorf("transition chat %s %s -> %s: %w", id, tr.From, tr.To, err)
	}
	return c, nil
}

// transitionSet is the SET clause of a Transition's UPDATE; transitionArgs
// are its arguments, $1 (the chat's id) to $12, $2 being From. A deadline
// ($5, microseconds from now, or NULL) is reckoned on the database's clock,
// as leases are. Leaving running ends the lease: no worker holds the chat
// any more. Any change from running (a finished step, running -> running,
// too) ends the count of recoveries in a row. Every change sets or clears
// the request to compact ($11). A run a person asks for ($12) starts the
// turn's repairs over.
var transitionSet = `status = $3::text,
	last_error = $4, action_deadline = now() + $5::bigint * interval '1 microsecond', version = version + 1, updated_at = $6,
	worker_id = CASE WHEN $7 THEN '' ELSE worker_id END,
	lease_expires_at = CASE WHEN $7 THEN NULL ELSE lease_expires_at END,
	lease_recoveries = CASE WHEN $2 = 'running' THEN 0 ELSE lease_recoveries END,
	output_repairs = CASE WHEN $12 THEN 0 ELSE output_repairs END,
	usage_input_tokens = usage_input_tokens + $8, usage_output_tokens = usage_output_tokens + $9,
	usage_cost_micros = usage_cost_micros + $10, compact_requested = $11`

func transitionArgs(id string, tr store.Transition) ([]any, error) {
	var lastErr []byte
	if tr.To == chat.Error {
		var err error
		if lastErr, err = dbutil.EncodeNullable(tr.LastError); err != nil {
			return nil, fmt.Errorf("transition chat %s: encode last_error: %w", id, err)
		}
	}
	var deadline *int64 // NULL: no deadline
	if tr.To == chat.RequiresAction {
		us := tr.ActionTimeout.Microseconds()
		deadline = &us
	}
	return []any{id, string(tr.From), string(tr.To), lastErr, deadline, dbutil.Now(), dbutil.LeftRunning(tr),
		tr.AddUsage.InputTokens, tr.AddUsage.OutputTokens, tr.AddUsage.CostMicros, tr.Compact, dbutil.RunAsked(tr)}, nil
}

// statusConflict explains a conditional status update that matched no row.
func (t *tx) statusConflict(ctx context.Context, id string, tr store.Transition) error {
	var status string
	err := t.q.QueryRow(ctx, `SELECT status FROM chats WHERE id = $1`, id).Scan(&status)
	return dbutil.StatusConflict(id, tr, status, notFound(err))
}

func (t *tx) SetInterruptRequested(ctx context.Context, id string, v bool) error {
	tag, err := t.q.Exec(ctx, `UPDATE chats SET interrupt_requested = $2 WHERE id = $1`, id, v)
	if err := oneRow(tag, err); err != nil {
		return fmt.Errorf("set interrupt of chat %s: %w", id, err)
	}
	return nil
}

// DeleteChat deletes the chat (its messages, queued messages and file
// uses with it), then, under the owner's lock, purges the owner's files
// and bytes nothing uses any more.
func (t *tx) DeleteChat(ctx context.Context, id string) error {
	var owner string
	err := t.q.QueryRow(ctx, `DELETE FROM chats WHERE id = $1 RETURNING owner`, id).Scan(&owner)
	err = notFound(err)
	if err == nil {
		err = t.LockOwner(ctx, owner)
	}
	if err == nil {
		err = purgeFiles(ctx, t.q, owner)
	}
	if err != nil {
		return fmt.Errorf("delete chat %s: %w", id, err)
	}
	return nil
}

// ChatIDs returns the id of every chat, of every owner, oldest first: for
// maintenance and for tests that check every chat's history.
func (s *Store) ChatIDs(ctx context.Context) ([]string, error) {
	ids, err := queryAll(ctx, s.q, dbutil.ScanString, `SELECT id FROM chats ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list chat ids: %w", err)
	}
	return ids, nil
}

// textOf is b as a nullable text parameter: nil is NULL.
func textOf(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func (t *tx) StartTurn(ctx context.Context, id string, format *chat.ResponseFormat) error {
	b, err := dbutil.EncodeNullable(format)
	if err != nil {
		return fmt.Errorf("start a turn of chat %s: %w", id, err)
	}
	tag, err := t.q.Exec(ctx, `UPDATE chats SET turn_format = $2, output_repairs = 0 WHERE id = $1`, id, textOf(b))
	if err := oneRow(tag, err); err != nil {
		return fmt.Errorf("start a turn of chat %s: %w", id, err)
	}
	return nil
}

func (t *tx) AddOutputRepair(ctx context.Context, id string) (int, error) {
	var n int
	err := t.q.QueryRow(ctx, `UPDATE chats SET output_repairs = output_repairs + 1 WHERE id = $1
		RETURNING output_repairs`, id).Scan(&n)
	if err = notFound(err); err != nil {
		return 0, fmt.Errorf("count an output repair of chat %s: %w", id, err)
	}
	return n, nil
}
