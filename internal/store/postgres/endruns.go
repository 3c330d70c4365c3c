package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// The status changes that end a run, checked against the state table when
// the package loads.
var (
	_, endWaiting = dbutil.Change(chat.Running, chat.Waiting)
	_, endPending = dbutil.Change(chat.Running, chat.Pending)
)

// endRunsSQL ends many runs in one statement, over arrays: the lease check
// is in the UPDATE's WHERE, so an end whose lease is gone updates no row
// and nothing of it is inserted; the answers, and for chats with a queue
// its promotion, hang off the rows that were updated. It returns, for each
// chat ended, the chat after and its promoted messages as JSON.
var endRunsSQL = `WITH v AS (
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[],
			$7::bigint[], $8::bigint[], $9::bigint[])
			AS v(chat_id, worker_id, gen, msg_id, parts, usage, in_tok, out_tok, cost)),
	u AS (
		UPDATE chats c SET
			status = CASE WHEN EXISTS (SELECT 1 FROM queued_messages q WHERE q.chat_id = c.id) THEN ` + endPending + ` ELSE ` + endWaiting + ` END,
			last_error = NULL, action_deadline = NULL, version = c.version + 1, updated_at = $10,
			worker_id = '', lease_expires_at = NULL, lease_recoveries = 0, interrupt_requested = false,
			usage_input_tokens = c.usage_input_tokens + v.in_tok, usage_output_tokens = c.usage_output_tokens + v.out_tok,
			usage_cost_micros = c.usage_cost_micros + v.cost
		FROM v
		WHERE c.id = v.chat_id AND c.status = 'running' AND c.worker_id = v.worker_id AND c.lease_generation = v.gen
		RETURNING ` + qualified("c", chatColumns) + `),
	a AS (
		INSERT INTO messages (id, chat_id, role, parts, usage, created_at) OVERRIDING SYSTEM VALUE
		SELECT v.msg_id, v.chat_id, 'assistant', v.parts::json, v.usage::json, $10 FROM v JOIN u ON u.id = v.chat_id),
	q AS (
		DELETE FROM queued_messages q USING u WHERE q.chat_id = u.id AND u.status = ` + endPending + `
		RETURNING q.id, q.chat_id, q.parts),
	p AS (
		INSERT INTO messages (chat_id, role, parts, created_at)
		SELECT q.chat_id, 'user', q.parts, $10 FROM q ORDER BY q.chat_id, q.id
		RETURNING id, chat_id, parts)
	SELECT ` + qualified("u", chatColumns) + `,
		(SELECT coalesce(json_agg(json_build_object('id', p.id, 'parts', p.parts) ORDER BY p.id), '[]') FROM p WHERE p.chat_id = u.id)
	FROM u`

// qualified prefixes each column of a column list with table.
func qualified(table, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = table + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// EndRuns ends the runs in one round trip: it first locks their chats' rows
// (in id order, so two batches cannot deadlock), in a statement of its
// own, so that the statement that ends them starts after any transaction
// it waited for and sees a message such a transaction queued.
func (t *tx) EndRuns(ctx context.Context, ends []store.RunEnd) ([]store.RunEnded, error) {
	if len(ends) == 0 {
		return nil, nil
	}
	n := len(ends)
	ids, workers, parts, usages := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	gens, msgIDs, in, out, cost := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, e := range ends {
		if err := dbutil.CheckLease(e.Lease); err != nil {
			return nil, fmt.Errorf("end runs: %w", err)
		}
		if e.Answer.ID == 0 {
			return nil, fmt.Errorf("end run of chat %s: the answer has no reserved id", e.Lease.ChatID)
		}
		p, err := dbutil.EncodeParts(e.Answer.Parts)
		if err != nil {
			return nil, fmt.Errorf("end run of chat %s: %w", e.Lease.ChatID, err)
		}
		u, err := dbutil.EncodeNullable(e.Answer.Usage)
		if err != nil {
			return nil, fmt.Errorf("end run of chat %s: encode usage: %w", e.Lease.ChatID, err)
		}
		if u != nil {
			s := string(u)
			usages[i] = &s
		}
		ids[i], workers[i], gens[i], msgIDs[i], parts[i] = e.Lease.ChatID, e.Lease.WorkerID, e.Lease.Generation, e.Answer.ID, string(p)
		if e.Answer.Usage != nil {
			in[i], out[i], cost[i] = e.Answer.Usage.InputTokens, e.Answer.Usage.OutputTokens, e.Answer.Usage.CostMicros
		}
	}
	locks := slices.Clone(ids)
	slices.Sort(locks)
	t.lazy.deferExec(func(_ pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("lock %d chats to end their runs: %w", n, err)
		}
		return nil
	}, `SELECT id FROM chats WHERE id = ANY($1) ORDER BY id FOR UPDATE`, locks)
	now := dbutil.Now()
	rows, err := t.q.Query(ctx, endRunsSQL, ids, workers, gens, msgIDs, parts, usages, in, out, cost, now)
	if err != nil {
		return nil, fmt.Errorf("end %d runs: %w", n, classify(err))
	}
	defer rows.Close() // it also ends the round trip the rows came in
	ended := map[string]store.RunEnded{}
	for rows.Next() {
		var promoted []byte
		c, err := scanChat(withExtra{rows, &promoted})
		if err != nil {
			return nil, fmt.Errorf("end %d runs: %w", n, err)
		}
		r := store.RunEnded{Chat: c}
		if r.Promoted, err = decodePromoted(c.ID, promoted, now); err != nil {
			return nil, err
		}
		ended[c.ID] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("end %d runs: %w", n, classify(err))
	}
	rows.Close()
	res := make([]store.RunEnded, n)
	for i, e := range ends {
		r, ok := ended[e.Lease.ChatID]
		if !ok {
			res[i].Err = fmt.Errorf("end run of chat %s (worker %s, generation %d): %w", e.Lease.ChatID, e.Lease.WorkerID, e.Lease.Generation, store.ErrLeaseLost)
			continue
		}
		r.Answer = e.Answer
		r.Answer.CreatedAt = now
		res[i] = r
	}
	return res, nil
}

// withExtra scans a row of chatColumns and one more column into extra.
type withExtra struct {
	pgx.Rows
	extra *[]byte
}

func (w withExtra) Scan(dest ...any) error { return w.Rows.Scan(append(dest, w.extra)...) }

// decodePromoted reads the promoted messages of a chat, as endRunsSQL
// aggregates them.
func decodePromoted(chatID string, b []byte, at time.Time) ([]chat.Message, error) {
	var rows []struct {
		ID    int64           `json:"id"`
		Parts json.RawMessage `json:"parts"`
	}
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("promoted messages of chat %s: %w", chatID, err)
	}
	var out []chat.Message
	for _, r := range rows {
		parts, err := dbutil.DecodeParts(r.Parts)
		if err != nil {
			return nil, fmt.Errorf("promoted message %d: %w", r.ID, err)
		}
		out = append(out, chat.Message{ID: r.ID, ChatID: chatID, Role: chat.RoleUser, Parts: parts, CreatedAt: at})
	}
	return out, nil
}
