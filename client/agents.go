package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Where an agent was defined (Agent.Source).
const (
	AgentSourceAPI    = "api"    // an owner wrote it through the API
	AgentSourceConfig = "config" // the server's configuration file: read-only
)

// Agent is a chat configuration stored under a name (docs/agents.md):
// every chat created with its name starts from its current version. Name
// and the definition's fields are what a client writes; Version, Source,
// Owner and the times are the server's.
type Agent struct {
	Name         string        `json:"name"`
	Description  string        `json:"description,omitempty"`
	Model        string        `json:"model,omitempty"` // "": the server's default
	SystemPrompt string        `json:"system_prompt,omitempty"`
	Tools        []string      `json:"tools"` // globs over server-side tools; nil: every one, empty: none
	DynamicTools []DynamicTool `json:"dynamic_tools,omitempty"`
	Approve      []string      `json:"approve,omitempty"`
	// OutputSchema, a JSON Schema of an object, asks the final answer of
	// every turn as JSON valid against it.
	OutputSchema json.RawMessage   `json:"output_schema,omitempty"`
	Subagents    []string          `json:"subagents,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Limits       AgentLimits       `json:"limits,omitzero"`

	Version   int       `json:"version,omitempty"`
	Source    string    `json:"source,omitempty"`
	Owner     string    `json:"owner,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// AgentLimits bound the runs of an agent's chats.
type AgentLimits struct {
	MaxSteps int    `json:"max_steps,omitempty"`
	Timeout  string `json:"timeout,omitempty"` // a Go duration, "10m"
}

func agentPath(name string, sub ...string) string {
	p := v1 + "/agents/" + url.PathEscape(name)
	for _, s := range sub {
		p += "/" + s
	}
	return p
}

// CreateAgent stores a new agent of the owner, at version 1.
func (c *Client) CreateAgent(ctx context.Context, a Agent) (Agent, error) {
	var out Agent
	err := c.do(ctx, http.MethodPost, v1+"/agents", nil, a, &out)
	return out, err
}

// ListAgents lists the agents the owner may use: the configuration's and
// its own, by name.
func (c *Client) ListAgents(ctx context.Context) ([]Agent, error) {
	var body struct {
		Agents []Agent `json:"agents"`
	}
	if err := c.do(ctx, http.MethodGet, v1+"/agents", nil, nil, &body); err != nil {
		return nil, err
	}
	return body.Agents, nil
}

// GetAgent reads the current version of an agent.
func (c *Client) GetAgent(ctx context.Context, name string) (Agent, error) {
	var out Agent
	err := c.do(ctx, http.MethodGet, agentPath(name), nil, nil, &out)
	return out, err
}

// ReplaceAgent makes a the agent's new version: every field as a has it.
func (c *Client) ReplaceAgent(ctx context.Context, name string, a Agent) (Agent, error) {
	var out Agent
	err := c.do(ctx, http.MethodPut, agentPath(name), nil, a, &out)
	return out, err
}

// PatchAgent makes a new version of the agent with the fields of patch
// (JSON names, like "system_prompt") replaced; a nil value clears one.
func (c *Client) PatchAgent(ctx context.Context, name string, patch map[string]any) (Agent, error) {
	var out Agent
	err := c.do(ctx, http.MethodPatch, agentPath(name), nil, patch, &out)
	return out, err
}

// DeleteAgent deletes an agent; the chats made from it keep their version.
func (c *Client) DeleteAgent(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, agentPath(name), nil, nil, nil)
}

// AgentVersions lists every version of an agent, oldest first.
func (c *Client) AgentVersions(ctx context.Context, name string) ([]Agent, error) {
	var body struct {
		Versions []Agent `json:"versions"`
	}
	if err := c.do(ctx, http.MethodGet, agentPath(name, "versions"), nil, nil, &body); err != nil {
		return nil, err
	}
	return body.Versions, nil
}
