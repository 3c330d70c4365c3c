package sqlite

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

func (r reader) GetAgent(ctx context.Context, owner, name string) (agent.Agent, error) {
	a, err := dbutil.ScanAgent(r.q.QueryRowContext(ctx, `SELECT `+dbutil.AgentColumns+`
		FROM agents a JOIN agent_versions v ON v.owner = a.owner AND v.name = a.name AND v.version = a.version
		WHERE a.owner = ? AND a.name = ?`, owner, name))
	if err = notFound(err); err != nil {
		return agent.Agent{}, fmt.Errorf("get agent %s: %w", name, err)
	}
	return a, nil
}

func (r reader) GetAgentVersion(ctx context.Context, owner, name string, version int) (agent.Agent, error) {
	a, err := dbutil.ScanAgent(r.q.QueryRowContext(ctx, `SELECT `+dbutil.AgentColumns+`
		FROM agents a JOIN agent_versions v ON v.owner = a.owner AND v.name = a.name
		WHERE a.owner = ? AND a.name = ? AND v.version = ?`, owner, name, version))
	if err = notFound(err); err != nil {
		return agent.Agent{}, fmt.Errorf("get agent %s version %d: %w", name, version, err)
	}
	return a, nil
}

func (r reader) ListAgents(ctx context.Context, owner string) ([]agent.Agent, error) {
	return r.agents(ctx, "list agents", `SELECT `+dbutil.AgentColumns+`
		FROM agents a JOIN agent_versions v ON v.owner = a.owner AND v.name = a.name AND v.version = a.version
		WHERE a.owner = ? AND a.deleted = 0 ORDER BY a.name`, owner)
}

func (r reader) ListAgentVersions(ctx context.Context, owner, name string) ([]agent.Agent, error) {
	out, err := r.agents(ctx, "list versions of agent "+name, `SELECT `+dbutil.AgentColumns+`
		FROM agents a JOIN agent_versions v ON v.owner = a.owner AND v.name = a.name
		WHERE a.owner = ? AND a.name = ? ORDER BY v.version`, owner, name)
	return dbutil.AgentVersions(name, out, err)
}

// agents reads the rows of a query of dbutil.AgentColumns.
func (r reader) agents(ctx context.Context, op, query string, args ...any) ([]agent.Agent, error) {
	out, err := queryAll(ctx, r.q, dbutil.ScanAgent, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

func (t *tx) PutAgentVersion(ctx context.Context, a *agent.Agent) error {
	if err := dbutil.CheckNewAgentVersion(a); err != nil {
		return fmt.Errorf("put agent: %w", err)
	}
	def, err := dbutil.EncodeAgent(a)
	if err != nil {
		return err
	}
	now := dbutil.Now()
	// The agent's row first (the versions refer to it): a new one, or the
	// existing one moved to this version, re-created if it was deleted.
	// Only a row at the version before this one moves, so a write that
	// lost a race changes nothing.
	res, err := t.q.ExecContext(ctx, `INSERT INTO agents (owner, name, version, deleted, created_at, updated_at)
		SELECT ?, ?, ?, 0, ?, ? WHERE EXISTS (SELECT 1 FROM owners WHERE name = ?)
		ON CONFLICT (owner, name) DO UPDATE SET version = excluded.version, deleted = 0, updated_at = excluded.updated_at,
			created_at = CASE WHEN agents.deleted THEN excluded.created_at ELSE agents.created_at END
		WHERE agents.version = excluded.version - 1`,
		a.Owner, a.Name, a.Version, dbutil.Micros(now), dbutil.Micros(now), a.Owner)
	if err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, err)
	} else if n == 0 {
		return t.agentRefused(ctx, a)
	}
	res, err = t.q.ExecContext(ctx, `INSERT INTO agent_versions (owner, name, version, definition, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, a.Owner, a.Name, a.Version, string(def), dbutil.Micros(now))
	if err != nil {
		return fmt.Errorf("put agent %s version %d: %w", a.Name, a.Version, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, err)
	} else if n == 0 {
		return fmt.Errorf("put agent %s version %d: %w", a.Name, a.Version, store.ErrExists)
	}
	var created int64
	if err := t.q.QueryRowContext(ctx, `SELECT created_at FROM agents WHERE owner = ? AND name = ?`, a.Owner, a.Name).Scan(&created); err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, err)
	}
	a.CreatedAt, a.UpdatedAt, a.Source, a.Deleted = dbutil.FromMicros(created), now, agent.SourceAPI, false
	return nil
}

// agentRefused explains a PutAgentVersion whose agent row did not move:
// the version is taken (ErrExists), or the owner does not exist.
func (t *tx) agentRefused(ctx context.Context, a *agent.Agent) error {
	var owner bool
	if err := t.q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM owners WHERE name = ?)`, a.Owner).Scan(&owner); err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, err)
	}
	if !owner {
		return fmt.Errorf("put agent %s: owner %s: %w", a.Name, a.Owner, store.ErrNotFound)
	}
	return fmt.Errorf("put agent %s version %d: %w", a.Name, a.Version, store.ErrExists)
}

func (t *tx) DeleteAgent(ctx context.Context, owner, name string) error {
	res, err := t.q.ExecContext(ctx, `UPDATE agents SET deleted = 1, updated_at = ? WHERE owner = ? AND name = ? AND deleted = 0`,
		dbutil.Micros(dbutil.Now()), owner, name)
	if err != nil {
		return fmt.Errorf("delete agent %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete agent %s: %w", name, err)
	} else if n == 0 {
		return fmt.Errorf("delete agent %s: %w", name, store.ErrNotFound)
	}
	return nil
}

func (t *tx) SetChatAgentVersion(ctx context.Context, c *chat.Chat) error {
	js, err := dbutil.EncodeChat(c)
	if err != nil {
		return fmt.Errorf("set agent version of chat %s: %w", c.ID, err)
	}
	now := dbutil.Now()
	err = t.q.QueryRowContext(ctx, `UPDATE chats SET agent_version = ?, model = ?, system_prompt = ?, tools = ?, approve = ?,
			dynamic_tools = ?, max_steps = ?, response_format = ?, version = version + 1, updated_at = ?
		WHERE id = ? RETURNING version`,
		c.AgentVersion, c.Model, c.SystemPrompt, text(js.Tools), text(js.Approve), text(js.DynamicTools), c.MaxSteps,
		text(js.ResponseFormat), dbutil.Micros(now), c.ID).Scan(&c.Version)
	if err = notFound(err); err != nil {
		return fmt.Errorf("set agent version of chat %s: %w", c.ID, err)
	}
	c.UpdatedAt = now
	return nil
}
