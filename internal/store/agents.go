package store

import (
	"context"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/chat"
)

// MaxAgents bounds the agents one owner may have (deleted ones not
// counted): every write of an agent reads them all to check delegation.
const MaxAgents = 500

// AgentReader reads owners' agents. A deleted agent's versions stay
// readable by number, for the chats that use them.
type AgentReader interface {
	// GetAgent returns the current version of the owner's agent, Deleted
	// set if it was deleted; ErrNotFound if the owner never had one of
	// that name.
	GetAgent(ctx context.Context, owner, name string) (agent.Agent, error)
	// GetAgentVersion returns one version of the owner's agent, deleted or
	// not, with the agent's CreatedAt and the version's time as
	// UpdatedAt; ErrNotFound if there is no such version.
	GetAgentVersion(ctx context.Context, owner, name string, version int) (agent.Agent, error)
	// ListAgents returns the owner's agents that are not deleted, each at
	// its current version, by name.
	ListAgents(ctx context.Context, owner string) ([]agent.Agent, error)
	// ListAgentVersions returns every version of the owner's agent, oldest
	// first, each with the version's time as CreatedAt and UpdatedAt (a
	// deleted and re-created agent's earlier versions among them);
	// ErrNotFound if the owner never had an agent of that name.
	ListAgentVersions(ctx context.Context, owner, name string) ([]agent.Agent, error)
}

// AgentWriter writes owners' agents, inside a transaction. Writers of one
// owner's agents take the owner's lock (Tx.LockOwner) first, so the checks
// they make against the owner's other agents hold when they commit.
type AgentWriter interface {
	// PutAgentVersion writes a new version of the owner's agent and makes it
	// current: a.Owner, a.Name and a.Version (one more than the agent's
	// last version, or 1 for a name never used) must be set. It creates
	// the agent if the owner has none of that name, and brings back a
	// deleted one (a new CreatedAt; its earlier versions stay). It sets
	// a.CreatedAt, a.UpdatedAt and a.Source. ErrExists if that version
	// exists already (another write took it; nothing was written);
	// ErrNotFound if the owner does not exist.
	PutAgentVersion(ctx context.Context, a *agent.Agent) error
	// DeleteAgent marks the owner's agent deleted; its versions stay.
	// ErrNotFound if it does not exist or is deleted already.
	DeleteAgent(ctx context.Context, owner, name string) error
	// SetChatAgentVersion moves a chat to another version of its agent:
	// it writes c.AgentVersion and the fields the version gives the chat
	// (model, system prompt, tools, approve, dynamic tools, max steps) and bumps
	// the chat's version and UpdatedAt, which it sets on c. ErrNotFound if
	// the chat does not exist.
	SetChatAgentVersion(ctx context.Context, c *chat.Chat) error
}
