package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// AgentExistsError refuses an agent whose name the owner, or the
// configuration file, already has.
type AgentExistsError struct {
	Name   string
	Config bool // the name is a configured agent's
}

func (e *AgentExistsError) Error() string {
	if e.Config {
		return fmt.Sprintf("agent %q is defined in the configuration file; choose another name", e.Name)
	}
	return fmt.Sprintf("agent %q already exists; change it with PUT or PATCH", e.Name)
}

// ReadOnlyError refuses a change of an agent of the configuration file.
type ReadOnlyError struct{ Name string }

func (e *ReadOnlyError) Error() string {
	return fmt.Sprintf("agent %q is defined in the configuration file and cannot be changed through the API", e.Name)
}

// AgentInUseError refuses deleting an agent other agents delegate to.
type AgentInUseError struct {
	Name string
	By   []string // the agents that name it as a subagent
}

func (e *AgentInUseError) Error() string {
	return fmt.Sprintf("agent %q is a subagent of %s; remove it from their subagents first", e.Name, strings.Join(e.By, ", "))
}

// TooManyAgentsError refuses a new agent of an owner that has
// store.MaxAgents already.
type TooManyAgentsError struct{ Limit int }

func (e *TooManyAgentsError) Error() string {
	return fmt.Sprintf("an owner may have at most %d agents; delete one first", e.Limit)
}

// agentChecker checks agents against the server as it is now.
func (s *Service) agentChecker() agent.Checker { return s.cfg.AgentChecker(s.isServerTool) }

// ListAgents returns the agents the owner sees: the configuration's and
// its own, by name, each name once. An own agent of a name the
// configuration file took after it was written is hidden, as it is from
// every read and new chat: the file's agent wins.
func (s *Service) ListAgents(ctx context.Context, owner string) ([]agent.Agent, error) {
	own, err := s.st.ListAgents(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	own = slices.DeleteFunc(own, func(a agent.Agent) bool { _, ok := s.cfg.FindAgent(a.Name); return ok })
	out := append(slices.Clone(s.cfg.Agents), own...)
	slices.SortFunc(out, func(a, b agent.Agent) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// GetAgent returns the current version of an agent the owner sees;
// store.ErrNotFound if there is none (or it was deleted).
func (s *Service) GetAgent(ctx context.Context, owner, name string) (agent.Agent, error) {
	return s.findAgent(ctx, s.st, owner, name)
}

// findAgent looks the name up among the configured agents, then the
// owner's live ones.
func (s *Service) findAgent(ctx context.Context, r store.Reader, owner, name string) (agent.Agent, error) {
	if a, ok := s.cfg.FindAgent(name); ok {
		return a, nil
	}
	a, err := r.GetAgent(ctx, owner, name)
	if err == nil && a.Deleted {
		err = store.ErrNotFound
	}
	if err != nil {
		return agent.Agent{}, fmt.Errorf("get agent %s: %w", name, err)
	}
	return a, nil
}

// AgentVersions returns every version of an agent the owner sees, oldest
// first.
func (s *Service) AgentVersions(ctx context.Context, owner, name string) ([]agent.Agent, error) {
	if a, ok := s.cfg.FindAgent(name); ok {
		a.UpdatedAt = a.CreatedAt
		return []agent.Agent{a}, nil
	}
	if _, err := s.findAgent(ctx, s.st, owner, name); err != nil {
		return nil, err
	}
	vs, err := s.st.ListAgentVersions(ctx, owner, name)
	if err != nil {
		return nil, fmt.Errorf("versions of agent %s: %w", name, err)
	}
	return vs, nil
}

// CreateAgent checks a and stores it as the owner's new agent, version 1
// (or, for the name of an agent the owner deleted, the version after that
// agent's last).
func (s *Service) CreateAgent(ctx context.Context, owner string, a agent.Agent) (agent.Agent, error) {
	if _, ok := s.cfg.FindAgent(a.Name); ok {
		return agent.Agent{}, &AgentExistsError{Name: a.Name, Config: true}
	}
	return s.writeAgent(ctx, owner, a.Name, func(cur *agent.Agent, own []agent.Agent) (agent.Agent, error) {
		if cur != nil && !cur.Deleted {
			return agent.Agent{}, &AgentExistsError{Name: a.Name}
		}
		if len(own) >= store.MaxAgents {
			return agent.Agent{}, &TooManyAgentsError{Limit: store.MaxAgents}
		}
		return a, nil
	})
}

// ReplaceAgent makes a the new version of the owner's agent (PUT): every
// field as a has it. The name in a, if any, must be the agent's.
func (s *Service) ReplaceAgent(ctx context.Context, owner, name string, a agent.Agent) (agent.Agent, error) {
	if a.Name != "" && a.Name != name {
		return agent.Agent{}, &chat.ValidationError{Field: "name", Message: "an agent cannot be renamed; create one under the new name"}
	}
	a.Name = name
	return s.changeAgent(ctx, owner, name, func(agent.Agent) (agent.Agent, error) { return a, nil })
}

// PatchAgent makes a new version of the owner's agent with the fields
// patch gives replaced (PATCH).
func (s *Service) PatchAgent(ctx context.Context, owner, name string, patch map[string]json.RawMessage) (agent.Agent, error) {
	return s.changeAgent(ctx, owner, name, func(cur agent.Agent) (agent.Agent, error) { return agent.Merge(cur, patch) })
}

// changeAgent writes the next version of an existing agent of the owner,
// as change makes it from the current one.
func (s *Service) changeAgent(ctx context.Context, owner, name string, change func(agent.Agent) (agent.Agent, error)) (agent.Agent, error) {
	if _, ok := s.cfg.FindAgent(name); ok {
		return agent.Agent{}, &ReadOnlyError{Name: name}
	}
	return s.writeAgent(ctx, owner, name, func(cur *agent.Agent, _ []agent.Agent) (agent.Agent, error) {
		if cur == nil || cur.Deleted {
			return agent.Agent{}, fmt.Errorf("agent %s: %w", name, store.ErrNotFound)
		}
		return change(*cur)
	})
}

// writeAgent writes a new version of the owner's agent name in one
// transaction under the owner's lock: next makes it from the current
// version (nil: none) and the owner's live agents; it is checked, alone
// and against the other agents, and stored as the version after the
// last. A version equal to the current one is not written again.
func (s *Service) writeAgent(ctx context.Context, owner, name string, next func(cur *agent.Agent, own []agent.Agent) (agent.Agent, error)) (agent.Agent, error) {
	check := s.agentChecker()
	var out agent.Agent
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.LockOwner(ctx, owner); err != nil {
			return err
		}
		var cur *agent.Agent
		switch c, err := tx.GetAgent(ctx, owner, name); {
		case err == nil:
			cur = &c
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		own, err := tx.ListAgents(ctx, owner)
		if err != nil {
			return err
		}
		a, err := next(cur, own)
		if err != nil {
			return err
		}
		a.Name, a.Owner = name, owner
		if err := check.Check(&a); err != nil {
			return err
		}
		mine := func(n string) (agent.Agent, bool) {
			if c, ok := s.cfg.FindAgent(n); ok {
				return c, true
			}
			i := slices.IndexFunc(own, func(o agent.Agent) bool { return o.Name == n })
			if i < 0 {
				return agent.Agent{}, false
			}
			return own[i], true
		}
		if err := check.CheckGraph(a, mine, append(slices.Clone(s.cfg.Agents), own...)); err != nil {
			return err
		}
		if cur != nil && !cur.Deleted && sameDefinition(cur.Definition, a.Definition) {
			out = *cur
			return nil
		}
		a.Version = 1
		if cur != nil {
			a.Version = cur.Version + 1
		}
		if err := tx.PutAgentVersion(ctx, &a); err != nil {
			return err
		}
		out = a
		return nil
	})
	if err != nil {
		return agent.Agent{}, fmt.Errorf("write agent %s: %w", name, err)
	}
	return out, nil
}

// sameDefinition reports whether two definitions are stored alike.
func sameDefinition(a, b agent.Definition) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// DeleteAgent deletes the owner's agent. Chats made from it keep the
// version they use; an agent another agent delegates to is not deleted
// (AgentInUseError). The name of a configured agent deletes the owner's
// own agent of that name, hidden since the configuration file took the
// name, so the owner can clear the clash; with none it is ReadOnlyError.
func (s *Service) DeleteAgent(ctx context.Context, owner, name string) error {
	if _, ok := s.cfg.FindAgent(name); ok {
		return s.deleteHiddenAgent(ctx, owner, name)
	}
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.LockOwner(ctx, owner); err != nil {
			return err
		}
		own, err := tx.ListAgents(ctx, owner)
		if err != nil {
			return err
		}
		var by []string
		for _, o := range own {
			if slices.Contains(o.Subagents, name) {
				by = append(by, o.Name)
			}
		}
		if by != nil {
			return &AgentInUseError{Name: name, By: by}
		}
		return tx.DeleteAgent(ctx, owner, name)
	})
	if err != nil {
		return fmt.Errorf("delete agent %s: %w", name, err)
	}
	return nil
}

// deleteHiddenAgent deletes the owner's agent name that a configured
// agent of the same name hides. Other agents naming it as a subagent
// already delegate to the configured one, so they do not keep it.
func (s *Service) deleteHiddenAgent(ctx context.Context, owner, name string) error {
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.LockOwner(ctx, owner); err != nil {
			return err
		}
		return tx.DeleteAgent(ctx, owner, name)
	})
	if errors.Is(err, store.ErrNotFound) {
		return &ReadOnlyError{Name: name}
	}
	if err != nil {
		return fmt.Errorf("delete agent %s: %w", name, err)
	}
	return nil
}

// fromAgent fills what the request leaves out from the current version of
// the agent it names: model, system prompt, tools, approve and dynamic
// tools when not given, the agent's labels under the request's, and the
// agent's output schema as the response format unless the request has
// one. It returns the agent; an unknown or deleted one is a validation
// error of "agent".
func (s *Service) fromAgent(ctx context.Context, owner string, in *NewChat) (agent.Agent, error) {
	a, err := s.findAgent(ctx, s.st, owner, in.Agent)
	if errors.Is(err, store.ErrNotFound) {
		return agent.Agent{}, &chat.ValidationError{Field: "agent", Message: fmt.Sprintf("agent %q does not exist", in.Agent)}
	}
	if err != nil {
		return agent.Agent{}, err
	}
	if in.Model == "" {
		in.Model = a.Model
	}
	if in.SystemPrompt == "" {
		in.SystemPrompt = a.SystemPrompt
	}
	if in.Tools == nil {
		in.Tools = slices.Clone(a.Tools)
	}
	if in.Approve == nil {
		in.Approve = slices.Clone(a.Approve)
	}
	if in.DynamicTools == nil {
		in.DynamicTools = slices.Clone(a.DynamicTools)
	}
	labels := maps.Clone(a.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, in.Labels)
	in.Labels = labels
	if in.ResponseFormat == nil {
		in.ResponseFormat = a.ResponseFormat()
	}
	return a, nil
}

// agentVersion resolves what PATCH /chats/{id} asks in agent_version for a
// chat made from an agent: "latest" (the agent's current version) or a
// version number.
func (s *Service) agentVersion(ctx context.Context, r store.Reader, c chat.Chat, want json.RawMessage) (agent.Agent, error) {
	bad := func(format string, args ...any) error {
		return &chat.ValidationError{Field: "agent_version", Message: fmt.Sprintf(format, args...)}
	}
	if c.Agent == "" {
		return agent.Agent{}, bad("the chat was not made from an agent")
	}
	var latest string
	var n int
	if json.Unmarshal(want, &latest) == nil {
		if latest != "latest" {
			return agent.Agent{}, bad(`%q must be "latest" or a version number`, latest)
		}
	} else if err := json.Unmarshal(want, &n); err != nil || n < 1 {
		return agent.Agent{}, bad(`%s must be "latest" or a version number`, want)
	}
	if a, ok := s.cfg.FindAgent(c.Agent); ok {
		if n > 1 {
			return agent.Agent{}, bad("agent %q has no version %d (an agent of the configuration file has version 1 only)", c.Agent, n)
		}
		return a, nil
	}
	cur, err := r.GetAgent(ctx, c.Owner, c.Agent)
	if errors.Is(err, store.ErrNotFound) || (err == nil && cur.Deleted) {
		return agent.Agent{}, bad("agent %q was deleted; the chat stays on version %d", c.Agent, c.AgentVersion)
	}
	if err != nil {
		return agent.Agent{}, err
	}
	if n == 0 {
		return cur, nil
	}
	v, err := r.GetAgentVersion(ctx, c.Owner, c.Agent, n)
	if errors.Is(err, store.ErrNotFound) {
		return agent.Agent{}, bad("agent %q has no version %d (its latest is %d)", c.Agent, n, cur.Version)
	}
	return v, err
}

// moveToAgentVersion sets the chat's fields to those agent version a
// gives: model (the default when it names none), system prompt, tools,
// approve, dynamic tools, response format and max steps.
func (s *Service) moveToAgentVersion(ctx context.Context, tx store.Tx, c *chat.Chat, a agent.Agent) error {
	if !slices.Contains([]chat.Status{chat.Waiting, chat.Error}, c.Status) {
		return &StatusError{ChatID: c.ID, Status: c.Status, Reason: "a chat moves to another agent version only while it is waiting or in error"}
	}
	c.AgentVersion, c.MaxSteps = a.Version, a.Limits.MaxSteps
	c.Model = a.Model
	if c.Model == "" {
		c.Model = s.cfg.DefaultModel
	}
	c.SystemPrompt = a.SystemPrompt
	c.Tools = slices.Clone(a.Tools)
	c.Approve = slices.Clone(a.Approve)
	c.DynamicTools = slices.Clone(a.DynamicTools)
	if c.DynamicTools == nil {
		c.DynamicTools = []chat.DynamicTool{}
	}
	c.ResponseFormat = a.ResponseFormat()
	return tx.SetChatAgentVersion(ctx, c)
}
