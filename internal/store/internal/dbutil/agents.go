package dbutil

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/store"
)

// CheckNewAgentVersion refuses a version PutAgentVersion cannot write.
func CheckNewAgentVersion(a *agent.Agent) error {
	if a.Owner == "" || a.Name == "" {
		return errors.New("an agent version needs an owner and a name")
	}
	if a.Version < 1 {
		return fmt.Errorf("agent %s: version %d is not a version number (from 1)", a.Name, a.Version)
	}
	return nil
}

// EncodeAgent is the stored form of an agent version: its definition as JSON.
func EncodeAgent(a *agent.Agent) ([]byte, error) {
	a.Normalize()
	b, err := json.Marshal(a.Definition)
	if err != nil {
		return nil, fmt.Errorf("encode agent %s: %w", a.Name, err)
	}
	return b, nil
}

// DecodeAgent reads a stored definition into a.
func DecodeAgent(a *agent.Agent, definition []byte) error {
	if err := json.Unmarshal(definition, &a.Definition); err != nil {
		return fmt.Errorf("decode agent %s version %d: %w", a.Name, a.Version, err)
	}
	a.Normalize()
	a.Source = agent.SourceAPI
	return nil
}

// NullVersion is a chat's agent version for its nullable column: nil (SQL
// NULL) for a chat made from no agent.
func NullVersion(v int) *int64 {
	if v == 0 {
		return nil
	}
	n := int64(v)
	return &n
}

// AgentVersions finishes the versions of agent name read in order: each
// one was created when it was written, and none means no such agent.
func AgentVersions(name string, versions []agent.Agent, err error) ([]agent.Agent, error) {
	if err == nil && len(versions) == 0 {
		err = fmt.Errorf("list versions of agent %s: %w", name, store.ErrNotFound)
	}
	for i := range versions {
		versions[i].CreatedAt = versions[i].UpdatedAt
	}
	return versions, err
}
