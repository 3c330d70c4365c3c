package facade

import (
	"context"
	"fmt"
	"strings"
)

// agentPrefix starts a model name that names an agent: "agent:<name>".
const agentPrefix = "agent:"

// AgentModel is an agent as the facade offers it as a model: its name and
// the configured model it runs ("" for the server's default model).
type AgentModel struct {
	Name  string
	Model string
}

// Agents gives the agents an owner may run through the facade: the
// owner's own and those of the configuration.
type Agents interface {
	// AgentModels lists them, each once, in the order /v1/models shows them.
	AgentModels(ctx context.Context, owner string) ([]AgentModel, error)
}

// AgentsFunc is a func as an Agents.
type AgentsFunc func(ctx context.Context, owner string) ([]AgentModel, error)

// AgentModels calls fn.
func (fn AgentsFunc) AgentModels(ctx context.Context, owner string) ([]AgentModel, error) {
	return fn(ctx, owner)
}

// runModel is what a request's model names: a configured model, or an
// agent and the model it runs.
type runModel struct {
	Model string // the configured model the run uses
	Agent string // the agent's name; "" when the request names a model
}

// resolveModel reads a request's model for owner: a configured model's
// name, or "agent:<name>" for one of the agents the owner may run. Any
// other is OpenAI's 404 model_not_found.
func (f *Facade) resolveModel(ctx context.Context, owner, name string) (runModel, error) {
	agent, ok := strings.CutPrefix(name, agentPrefix)
	if !ok {
		if _, ok := f.cfg.FindModel(name); !ok {
			return runModel{}, modelNotFound(name)
		}
		return runModel{Model: name}, nil
	}
	a, ok, err := f.findAgent(ctx, owner, agent)
	if err != nil {
		return runModel{}, err
	}
	if !ok {
		return runModel{}, modelNotFound(name)
	}
	return runModel{Model: f.agentModel(a), Agent: a.Name}, nil
}

// findAgent finds the agent of that name owner may run.
func (f *Facade) findAgent(ctx context.Context, owner, name string) (AgentModel, bool, error) {
	if f.agents == nil || name == "" {
		return AgentModel{}, false, nil
	}
	all, err := f.agents.AgentModels(ctx, owner)
	if err != nil {
		return AgentModel{}, false, fmt.Errorf("list the agents of %s: %w", owner, err)
	}
	for _, a := range all {
		if a.Name == name {
			return a, true, nil
		}
	}
	return AgentModel{}, false, nil
}

// agentModel is the configured model agent a runs.
func (f *Facade) agentModel(a AgentModel) string {
	if a.Model == "" {
		return f.cfg.DefaultModel
	}
	return a.Model
}
