package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

func (r reader) GetAgent(ctx context.Context, owner, name string) (agent.Agent, error) {
	a, err := dbutil.ScanAgent(r.q.QueryRow(ctx, `SELECT `+dbutil.AgentColumns+`
		FROM agents a JOIN agent_versions v ON v.owner = a.owner AND v.name = a.name AND v.version = a.version
		WHERE a.owner = $1 AND a.name = $2`, owner, name))
	if err = notFound(err); err != nil {
		return agent.Agent{}, fmt.Errorf("get agent %s: %w", name, err)
	}
	return a, nil
}

func (r reader) GetAgentVersion(ctx context.Context, owner, name string, version int) (agent.Agent, error) {
	a, err := dbutil.ScanAgent(r.q.QueryRow(ctx, `SELECT `+dbutil.AgentColumns+`
		FROM agents a JOIN agent_versions v ON v.owner = a.owner AND v.name = a.name
		WHERE a.owner = $1 AND a.name = $2 AND v.version = $3`, owner, name, version))
	if err = notFound(err); err != nil {
		return agent.Agent{}, fmt.Errorf("get agent %s version %d: %w", name, version, err)
	}
	return a, nil
}

func (r reader) ListAgents(ctx context.Context, owner string) ([]agent.Agent, error) {
	return r.agents(ctx, "list agents", `SELECT `+dbutil.AgentColumns+`
		FROM agents a JOIN agent_versions v ON v.owner = a.owner AND v.name = a.name AND v.version = a.version
		WHERE a.owner = $1 AND NOT a.deleted ORDER BY a.name`, owner)
}

func (r reader) ListAgentVersions(ctx context.Context, owner, name string) ([]agent.Agent, error) {
	out, err := r.agents(ctx, "list versions of agent "+name, `SELECT `+dbutil.AgentColumns+`
		FROM agents a JOIN agent_versions v ON v.owner = a.owner AND v.name = a.name
		WHERE a.owner = $1 AND a.name = $2 ORDER BY v.version`, owner, name)
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
	// lost a race changes nothing; neither that nor an unknown owner
	// raises an error, which would abort the transaction.
	var created = now
	err = t.q.QueryRow(ctx, `INSERT INTO agents (owner, name, version, deleted, created_at, updated_at)
		SELECT $1::text, $2::text, $3::integer, false, $4::timestamptz, $4::timestamptz
		WHERE EXISTS (SELECT 1 FROM owners WHERE name = $1)
		ON CONFLICT (owner, name) DO UPDATE SET version = excluded.version, deleted = false, updated_at = excluded.updated_at,
			created_at = CASE WHEN agents.deleted THEN excluded.created_at ELSE agents.created_at END
		WHERE agents.version = excluded.version - 1
		RETURNING created_at`, a.Owner, a.Name, a.Version, now).Scan(&created)
	if errors.Is(err, pgx.ErrNoRows) {
		return t.agentRefused(ctx, a)
	}
	if err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, classify(err))
	}
	tag, err := t.q.Exec(ctx, `INSERT INTO agent_versions (owner, name, version, definition, created_at)
		VALUES ($1, $2, $3, $4::json, $5) ON CONFLICT DO NOTHING`, a.Owner, a.Name, a.Version, string(def), now)
	if err != nil {
		return fmt.Errorf("put agent %s version %d: %w", a.Name, a.Version, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("put agent %s version %d: %w", a.Name, a.Version, store.ErrExists)
	}
	a.CreatedAt, a.UpdatedAt, a.Source, a.Deleted = created.UTC(), now, agent.SourceAPI, false
	return nil
}

// agentRefused explains a PutAgentVersion whose agent row did not move:
// the version is taken (ErrExists), or the owner does not exist.
func (t *tx) agentRefused(ctx context.Context, a *agent.Agent) error {
	var owner bool
	if err := t.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM owners WHERE name = $1)`, a.Owner).Scan(&owner); err != nil {
		return fmt.Errorf("put agent %s: %w", a.Name, err)
	}
	if !owner {
		return fmt.Errorf("put agent %s: owner %s: %w", a.Name, a.Owner, store.ErrNotFound)
	}
	return fmt.Errorf("put agent %s version %d: %w", a.Name, a.Version, store.ErrExists)
}

func (t *tx) DeleteAgent(ctx context.Context, owner, name string) error {
	tag, err := t.q.Exec(ctx, `UPDATE agents SET deleted = true, updated_at = $3 WHERE owner = $1 AND name = $2 AND NOT deleted`,
		owner, name, dbutil.Now())
	if err != nil {
		return fmt.Errorf("delete agent %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
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
	err = t.q.QueryRow(ctx, `UPDATE chats SET agent_version = $2, model = $3, system_prompt = $4, tools = $5::json,
			approve = $6::json, dynamic_tools = $7::json, max_steps = $9, response_format = $10,
			version = version + 1, updated_at = $8
		WHERE id = $1 RETURNING version`,
		c.ID, c.AgentVersion, c.Model, c.SystemPrompt, js.Tools, js.Approve, js.DynamicTools, now, c.MaxSteps, textOf(js.ResponseFormat)).Scan(&c.Version)
	if err = notFound(err); err != nil {
		return fmt.Errorf("set agent version of chat %s: %w", c.ID, err)
	}
	c.UpdatedAt = now
	return nil
}
