package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/chat"
)

// Subagents configures delegation from one agent to others.
type Subagents struct {
	// MaxDepth is how deep delegation may go: 1 lets an agent name
	// subagents that name none. Checked whenever an agent is written.
	MaxDepth int `yaml:"max_depth"`
}

// DefaultSubagentDepth is subagents.max_depth when the file does not set it.
const DefaultSubagentDepth = 1

// MaxSubagentDepth bounds subagents.max_depth.
const MaxSubagentDepth = 5

// checkAgents reads the file's agents (an entry has the fields of the
// API's agent object) into c.Agents and checks them whole: each field,
// unique names, and their subagents among them.
func (c *Config) checkAgents() error {
	if c.Subagents.MaxDepth < 0 || c.Subagents.MaxDepth > MaxSubagentDepth {
		return fmt.Errorf("subagents.max_depth %d: want 0 (no delegation) to %d", c.Subagents.MaxDepth, MaxSubagentDepth)
	}
	c.Agents = make([]agent.Agent, 0, len(c.AgentEntries))
	seen := map[string]int{}
	check := c.AgentChecker(nil)
	loaded := time.Now().UTC().Truncate(time.Second) // config agents are as old as the configuration read
	for i, entry := range c.AgentEntries {
		raw, err := json.Marshal(entry)
		if err != nil {
			return fmt.Errorf("agents[%d]: %v (keys must be strings)", i, err)
		}
		var a agent.Agent
		if err := agent.Decode(raw, &a); err != nil {
			return agentError(i, a.Name, err)
		}
		if a.Version != 0 || a.Source != "" || a.Owner != "" {
			return fmt.Errorf("agents[%d] (%s): version, source and owner are the server's to set", i, a.Name)
		}
		if err := check.Check(&a); err != nil {
			return agentError(i, a.Name, err)
		}
		if j, dup := seen[a.Name]; dup {
			return fmt.Errorf("agents[%d] (%s): name is used by agents[%d] too", i, a.Name, j)
		}
		seen[a.Name] = i
		a.Version, a.Source = 1, agent.SourceConfig
		a.CreatedAt, a.UpdatedAt = loaded, loaded
		c.Agents = append(c.Agents, a)
	}
	for i, a := range c.Agents {
		if err := check.CheckGraph(a, c.FindAgent, c.Agents); err != nil {
			return agentError(i, a.Name, err)
		}
	}
	return nil
}

// agentError names the entry and the field of a check's error.
func agentError(i int, name string, err error) error {
	var ve *chat.ValidationError
	if errors.As(err, &ve) {
		return fmt.Errorf("agents[%d] (%s): %s: %s", i, name, ve.Field, ve.Message)
	}
	return fmt.Errorf("agents[%d] (%s): %w", i, name, err)
}

// AgentChecker checks agents against the configured models and limits;
// serverTool reports the server-side tools' names (nil: none known).
func (c *Config) AgentChecker(serverTool func(string) bool) agent.Checker {
	return agent.Checker{
		Model:      func(name string) bool { _, ok := c.FindModel(name); return ok },
		ServerTool: serverTool,
		Limits:     c.Limits.Chat(),
		MaxDepth:   c.Subagents.MaxDepth,
		MaxSteps:   c.Limits.MaxSteps,
	}
}

// FindAgent returns the configured agent of that name.
func (c *Config) FindAgent(name string) (agent.Agent, bool) {
	for _, a := range c.Agents {
		if a.Name == name {
			return a, true
		}
	}
	return agent.Agent{}, false
}

// CheckAgentTools checks the file's agents against the server-side tools
// loaded at start, which the configuration alone does not know: a dynamic
// tool named like a server-side tool is an error naming the entry and the
// field. It returns a warning for each glob of an agent's tools that
// matches no server-side tool now, which is kept, as on a chat: a tool
// source may be reconnecting, or offer the tool later.
func (c *Config) CheckAgentTools(serverTools []string) (warnings []string, err error) {
	isServerTool := func(name string) bool { return slices.Contains(serverTools, name) }
	for i, a := range c.Agents {
		if err := chat.ValidateDynamicTools(a.DynamicTools, isServerTool, c.Limits.Chat()); err != nil {
			return nil, agentError(i, a.Name, err)
		}
		for _, j := range a.Tools.Unmatched(serverTools) {
			warnings = append(warnings, fmt.Sprintf("agents[%d] (%s): tools[%d] %q matches no server-side tool now", i, a.Name, j, a.Tools[j]))
		}
	}
	return warnings, nil
}
