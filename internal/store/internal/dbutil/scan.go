package dbutil

import (
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// The scanners below read the rows of both stores: a backend selects the
// columns each one names (columns.go) and passes the row. Times go through
// Time and NullTime, JSON columns are read as bytes and decoded here.

// ScanChat reads one row of ChatColumns.
func ScanChat(row Row) (chat.Chat, error) {
	var (
		c                                      chat.Chat
		tools, labels, lastErr, globs, approve []byte
		format, turn                           []byte
		timeoutMS                              int64
		agentVersion                           *int64
	)
	err := row.Scan(&c.ID, &c.Owner, &c.Title, &c.Model, &c.SystemPrompt, (*string)(&c.Status), &tools, &labels,
		&c.Archived, &lastErr, &c.Usage.InputTokens, &c.Usage.OutputTokens, &c.Usage.CostMicros,
		&timeoutMS, NullTime(&c.ActionDeadline), &c.WorkerID, &c.LeaseGeneration, NullTime(&c.LeaseExpiresAt),
		&c.InterruptRequested, Time(&c.CreatedAt), Time(&c.UpdatedAt), &c.Version, &c.LeaseRecoveries, &globs, &approve,
		&c.CompactRequested, &c.Agent, &agentVersion, &c.MaxSteps,
		&format, &turn, &c.OutputRepairs)
	if err != nil {
		return chat.Chat{}, err
	}
	if agentVersion != nil {
		c.AgentVersion = int(*agentVersion)
	}
	if err := DecodeChat(&c, tools, labels, lastErr); err != nil {
		return chat.Chat{}, err
	}
	if err := DecodeToolGlobs(&c, globs, approve); err != nil {
		return chat.Chat{}, err
	}
	if err := DecodeFormats(&c, format, turn); err != nil {
		return chat.Chat{}, err
	}
	c.ToolResultTimeout = time.Duration(timeoutMS) * time.Millisecond
	return c, nil
}

// ScanMessage reads one row of MessageColumns.
func ScanMessage(row Row) (chat.Message, error) {
	var (
		m            chat.Message
		parts, usage []byte
	)
	if err := row.Scan(&m.ID, &m.ChatID, (*string)(&m.Role), &parts, &usage, Time(&m.CreatedAt), &m.Superseded, &m.ParentID); err != nil {
		return m, err
	}
	var err error
	if m.Parts, err = DecodeParts(parts); err != nil {
		return m, fmt.Errorf("message %d: %w", m.ID, err)
	}
	if m.Usage, err = DecodeUsage(usage); err != nil {
		return m, fmt.Errorf("message %d: %w", m.ID, err)
	}
	return m, nil
}

// ScanQueued reads one row of QueuedColumns.
func ScanQueued(row Row) (chat.QueuedMessage, error) {
	var (
		q             chat.QueuedMessage
		parts, format []byte
	)
	if err := row.Scan(&q.ID, &q.ChatID, &parts, &format, Time(&q.CreatedAt)); err != nil {
		return q, err
	}
	var err error
	if q.Parts, err = DecodeParts(parts); err != nil {
		return q, fmt.Errorf("queued message %d: %w", q.ID, err)
	}
	if q.ResponseFormat, err = DecodeFormat(format); err != nil {
		return q, fmt.Errorf("queued message %d: %w", q.ID, err)
	}
	return q, nil
}

// ScanAgent reads one row of AgentColumns.
func ScanAgent(row Row) (agent.Agent, error) {
	var (
		a   agent.Agent
		def []byte
	)
	if err := row.Scan(&a.Owner, &a.Name, &a.Version, &a.Deleted, Time(&a.CreatedAt), Time(&a.UpdatedAt), &def); err != nil {
		return agent.Agent{}, err
	}
	if err := DecodeAgent(&a, def); err != nil {
		return agent.Agent{}, err
	}
	return a, nil
}

// ScanFile reads one row of FileColumns.
func ScanFile(row Row) (store.File, error) {
	var (
		f       store.File
		deleted *time.Time
	)
	if err := row.Scan(&f.ID, &f.Owner, &f.Name, &f.MediaType, &f.Size, &f.SHA256, Time(&f.CreatedAt), NullTime(&deleted)); err != nil {
		return store.File{}, err
	}
	f.Deleted = deleted != nil
	return f, nil
}

// ScanToken reads one row of TokenColumns.
func ScanToken(row Row) (store.Token, error) {
	var t store.Token
	if err := row.Scan(&t.ID, &t.Owner, &t.Name, &t.Hash, Time(&t.CreatedAt), NullTime(&t.RevokedAt)); err != nil {
		return store.Token{}, err
	}
	return t, nil
}

// ByChat groups messages by their chat, keeping their order.
func ByChat(msgs []chat.Message) map[string][]chat.Message {
	byChat := map[string][]chat.Message{}
	for _, m := range msgs {
		byChat[m.ChatID] = append(byChat[m.ChatID], m)
	}
	return byChat
}

// ScanExpired reads one row of a chat's id and action_deadline.
func ScanExpired(row Row) (store.Expired, error) {
	var e store.Expired
	err := row.Scan(&e.ChatID, Time(&e.Deadline))
	return e, err
}

// ScanOwnerStat reads one row of owner, pending, running, input_tokens,
// output_tokens, cost_micros.
func ScanOwnerStat(row Row) (store.OwnerStat, error) {
	var s store.OwnerStat
	err := row.Scan(&s.Owner, &s.Pending, &s.Running, &s.Usage.InputTokens, &s.Usage.OutputTokens, &s.Usage.CostMicros)
	return s, err
}
