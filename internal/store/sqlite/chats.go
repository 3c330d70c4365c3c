package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// nullMicros converts a nullable time for a microsecond column.
func nullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: dbutil.Micros(*t), Valid: true}
}

func (r reader) GetChat(ctx context.Context, id string) (chat.Chat, error) {
	c, err := dbutil.ScanChat(r.q.QueryRowContext(ctx, `SELECT `+dbutil.ChatColumns+` FROM chats WHERE id = ?`, id))
	if err != nil {
		return chat.Chat{}, fmt.Errorf("get chat %s: %w", id, notFound(err))
	}
	return c, nil
}

func (r reader) ListChats(ctx context.Context, q store.ChatQuery) (store.ChatPage, error) {
	limit := dbutil.PageLimit(q.Limit)
	where := []string{"owner = ?"}
	args := []any{q.Owner}
	if len(q.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(q.Statuses)-1)+")")
		for _, s := range q.Statuses {
			args = append(args, string(s))
		}
	}
	for k, v := range q.Labels {
		where = append(where, "EXISTS (SELECT 1 FROM json_each(chats.labels) AS l WHERE l.key = ? AND l.type = 'text' AND l.value = ?)")
		args = append(args, k, v)
	}
	if q.Archived != nil {
		where = append(where, "archived = ?")
		args = append(args, *q.Archived)
	}
	if q.Cursor != "" {
		at, id, err := dbutil.DecodeCursor(q.Cursor)
		if err != nil {
			return store.ChatPage{}, fmt.Errorf("list chats: %w", err)
		}
		where = append(where, "(created_at, id) < (?, ?)")
		args = append(args, dbutil.Micros(at), id)
	}
	args = append(args, limit+1)
	chats, err := queryAll(ctx, r.q, dbutil.ScanChat, `SELECT `+dbutil.ChatColumns+` FROM chats WHERE `+strings.Join(where, " AND ")+
		` ORDER BY created_at DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return store.ChatPage{}, fmt.Errorf("list chats of %s: %w", q.Owner, err)
	}
	return dbutil.ChatPage(chats, limit), nil
}

// LockChat reads the chat; the BEGIN IMMEDIATE transaction already excludes
// every other writer.
func (t *tx) LockChat(ctx context.Context, id string) (chat.Chat, error) {
	c, err := t.GetChat(ctx, id)
	if err != nil {
		return chat.Chat{}, fmt.Errorf("lock chat: %w", err)
	}
	return c, nil
}

// Now is this process's clock: the only one on the file, by which
// TransitionChat sets deadlines and ExpiredActions finds them passed.
func (t *tx) Now(context.Context) (time.Time, error) { return dbutil.Now(), nil }

func (t *tx) InsertChat(ctx context.Context, c *chat.Chat) error {
	if err := dbutil.CheckNewChat(c); err != nil {
		return fmt.Errorf("insert chat: %w", err)
	}
	js, err := dbutil.EncodeChat(c)
	if err != nil {
		return fmt.Errorf("insert chat %s: %w", c.ID, err)
	}
	now := dbutil.Now()
	res, err := t.q.ExecContext(ctx, `INSERT INTO chats (`+dbutil.ChatColumns+`)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?
		WHERE EXISTS (SELECT 1 FROM owners WHERE name = ?)
		ON CONFLICT (id) DO NOTHING`,
		c.ID, c.Owner, c.Title, c.Model, c.SystemPrompt, string(c.Status), text(js.DynamicTools), text(js.Labels),
		c.Archived, text(js.LastError), c.Usage.InputTokens, c.Usage.OutputTokens, c.Usage.CostMicros,
		c.ToolResultTimeout.Milliseconds(), nullMicros(c.ActionDeadline), c.WorkerID, c.LeaseGeneration,
		nullMicros(c.LeaseExpiresAt), c.InterruptRequested, dbutil.Micros(now), dbutil.Micros(now), text(js.Tools), text(js.Approve),
		c.CompactRequested, c.Agent, dbutil.NullVersion(c.AgentVersion), c.MaxSteps,
		text(js.ResponseFormat), text(js.TurnFormat), c.OutputRepairs, c.Owner)
	if err != nil {
		return fmt.Errorf("insert chat %s: %w", c.ID, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("insert chat %s: %w", c.ID, err)
	} else if n == 0 {
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
	err := t.q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE id = ?)`, id).Scan(&exists)
	return dbutil.InsertRefused(what, id, owner, exists, err)
}

func (t *tx) UpdateChatMeta(ctx context.Context, c *chat.Chat) error {
	labels, err := dbutil.EncodeLabels(c.Labels)
	if err != nil {
		return fmt.Errorf("update chat %s: %w", c.ID, err)
	}
	now := dbutil.Now()
	err = t.q.QueryRowContext(ctx, `UPDATE chats SET title = ?, labels = ?, archived = ?, version = version + 1, updated_at = ?
		WHERE id = ? RETURNING version`, c.Title, text(labels), c.Archived, dbutil.Micros(now), c.ID).Scan(&c.Version)
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
	var lastErr []byte
	if tr.To == chat.Error {
		var err error
		if lastErr, err = dbutil.EncodeNullable(tr.LastError); err != nil {
			return chat.Chat{}, fmt.Errorf("transition chat %s: encode last_error: %w", id, err)
		}
	}
	now := dbutil.Now()
	var deadline sql.NullInt64
	if tr.To == chat.RequiresAction {
		// This process is the only one on the file: its clock is the
		// database's.
		deadline = sql.NullInt64{Int64: dbutil.Micros(now.Add(tr.ActionTimeout)), Valid: true}
	}
	// Leaving running ends the lease: no worker holds the chat any more.
	// Any change from running (a finished step, running -> running, too)
	// ends the count of recoveries in a row. Every change sets or clears
	// the request to compact. A run a person asks for starts the turn's
	// repairs over.
	c, err := dbutil.ScanChat(t.q.QueryRowContext(ctx, `UPDATE chats
		SET status = ?, last_error = ?, action_deadline = ?, version = version + 1, updated_at = ?,
			compact_requested = ?,
			worker_id = CASE WHEN ? THEN '' ELSE worker_id END,
			lease_expires_at = CASE WHEN ? THEN NULL ELSE lease_expires_at END,
			lease_recoveries = CASE WHEN ? THEN 0 ELSE lease_recoveries END,
			output_repairs = CASE WHEN ? THEN 0 ELSE output_repairs END,
			usage_input_tokens = usage_input_tokens + ?, usage_output_tokens = usage_output_tokens + ?,
			usage_cost_micros = usage_cost_micros + ?
		WHERE id = ? AND status = ?
		RETURNING `+dbutil.ChatColumns,
		string(tr.To), text(lastErr), deadline, dbutil.Micros(now), tr.Compact,
		dbutil.LeftRunning(tr), dbutil.LeftRunning(tr), tr.From == chat.Running, dbutil.RunAsked(tr),
		tr.AddUsage.InputTokens, tr.AddUsage.OutputTokens, tr.AddUsage.CostMicros, id, string(tr.From)))
	if errors.Is(err, sql.ErrNoRows) {
		return chat.Chat{}, t.statusConflict(ctx, id, tr)
	}
	if err != nil {
		return chat.Chat{}, fmt.Errorf("transition chat %s %s -> %s: %w", id, tr.From, tr.To, err)
	}
	if err := addToLedger(ctx, t.q, c.Owner, now, tr.AddUsage); err != nil {
		return chat.Chat{}, fmt.Errorf("transition chat %s: %w", id, err)
	}
	return c, nil
}

// statusConflict explains a conditional status update that matched no row.
func (t *tx) statusConflict(ctx context.Context, id string, tr store.Transition) error {
	var status string
	err := t.q.QueryRowContext(ctx, `SELECT status FROM chats WHERE id = ?`, id).Scan(&status)
	return dbutil.StatusConflict(id, tr, status, notFound(err))
}

func (t *tx) SetInterruptRequested(ctx context.Context, id string, v bool) error {
	res, err := t.q.ExecContext(ctx, `UPDATE chats SET interrupt_requested = ? WHERE id = ?`, v, id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("set interrupt of chat %s: %w", id, err)
	}
	return nil
}

// DeleteChat deletes the chat (its messages, queued messages and file
// uses with it), then purges the owner's files and bytes nothing uses any
// more.
func (t *tx) DeleteChat(ctx context.Context, id string) error {
	var owner string
	err := t.q.QueryRowContext(ctx, `DELETE FROM chats WHERE id = ? RETURNING owner`, id).Scan(&owner)
	err = notFound(err)
	if err == nil {
		err = purgeFiles(ctx, t.q, owner)
	}
	if err != nil {
		return fmt.Errorf("delete chat %s: %w", id, err)
	}
	return nil
}

// oneRow checks that a statement changed a row: store.ErrNotFound if none.
func oneRow(res sql.Result, err error) error {
	if err != nil {
		return classify(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// ChatIDs returns the id of every chat, of every owner, oldest first: for
// maintenance and for tests that check every chat's history.
func (s *Store) ChatIDs(ctx context.Context) ([]string, error) {
	ids, err := queryAll(ctx, s.read, dbutil.ScanString, `SELECT id FROM chats ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list chat ids: %w", err)
	}
	return ids, nil
}

func (t *tx) StartTurn(ctx context.Context, id string, format *chat.ResponseFormat) error {
	b, err := dbutil.EncodeNullable(format)
	if err != nil {
		return fmt.Errorf("start a turn of chat %s: %w", id, err)
	}
	res, err := t.q.ExecContext(ctx, `UPDATE chats SET turn_format = ?, output_repairs = 0 WHERE id = ?`, text(b), id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("start a turn of chat %s: %w", id, err)
	}
	return nil
}

func (t *tx) AddOutputRepair(ctx context.Context, id string) (int, error) {
	var n int
	err := t.q.QueryRowContext(ctx, `UPDATE chats SET output_repairs = output_repairs + 1 WHERE id = ?
		RETURNING output_repairs`, id).Scan(&n)
	if err = notFound(err); err != nil {
		return 0, fmt.Errorf("count an output repair of chat %s: %w", id, err)
	}
	return n, nil
}
