package facade

import (
	"context"
	"net/http"
	"strings"

	"github.com/parleyhq/parley/internal/config"
)

// model is a model in OpenAI's shape, with what it takes: the kinds of
// content (text, image, pdf) and its context window in tokens (null when
// unknown), which OpenAI's own list does not say.
type model struct {
	ID            string   `json:"id"`
	Object        string   `json:"object"`
	Created       int64    `json:"created"`
	OwnedBy       string   `json:"owned_by"`
	Inputs        []string `json:"inputs"`
	ContextWindow *int64   `json:"context_window"`
}

// models lists the configured models, in configuration order, then the
// agents owner may run as "agent:<name>", each with what its model takes.
// created is 0: parley does not know when a model was made.
func (f *Facade) models(ctx context.Context, owner string) ([]model, error) {
	out := make([]model, 0, len(f.cfg.Models))
	for _, m := range f.cfg.Models {
		out = append(out, modelEntry(m.Name, m))
	}
	if f.agents == nil {
		return out, nil
	}
	agents, err := f.agents.AgentModels(ctx, owner)
	if err != nil {
		return nil, err
	}
	for _, a := range agents {
		out = append(out, f.agentEntry(a))
	}
	return out, nil
}

// agentEntry is agent a as a model: what its model takes (nothing known
// when the configuration no longer has its model).
func (f *Facade) agentEntry(a AgentModel) model {
	if c, ok := f.cfg.FindModel(f.agentModel(a)); ok {
		return modelEntry(agentPrefix+a.Name, c)
	}
	return model{ID: agentPrefix + a.Name, Object: "model", OwnedBy: "parley", Inputs: []string{}}
}

// listModels serves GET /v1/models.
func (f *Facade) listModels(w http.ResponseWriter, r *http.Request, owner string) error {
	all, err := f.models(r.Context(), owner)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": all})
	return nil
}

// getModel serves GET /v1/models/{model}: a configured model, or
// "agent:<name>" for one of the agents the owner may run.
func (f *Facade) getModel(w http.ResponseWriter, r *http.Request, owner string) error {
	name := r.PathValue("model")
	if agent, ok := strings.CutPrefix(name, agentPrefix); ok {
		a, found, err := f.findAgent(r.Context(), owner, agent)
		if err != nil {
			return err
		}
		if !found {
			return modelNotFound(name)
		}
		writeJSON(w, http.StatusOK, f.agentEntry(a))
		return nil
	}
	c, ok := f.cfg.FindModel(name)
	if !ok {
		return modelNotFound(name)
	}
	writeJSON(w, http.StatusOK, modelEntry(c.Name, c))
	return nil
}

// modelEntry is configured model c listed under id.
func modelEntry(id string, c config.Model) model {
	return model{ID: id, Object: "model", OwnedBy: "parley", Inputs: c.InputKinds(), ContextWindow: c.KnownWindow()}
}
