package facade

import (
	"net/http"
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

// models lists the configured models, in configuration order. created is
// 0: parley does not know when a model was made.
func (f *Facade) models() []model {
	out := make([]model, len(f.cfg.Models))
	for i, m := range f.cfg.Models {
		out[i] = model{ID: m.Name, Object: "model", OwnedBy: "parley", Inputs: m.InputKinds(), ContextWindow: m.KnownWindow()}
	}
	return out
}

// listModels serves GET /v1/models.
func (f *Facade) listModels(w http.ResponseWriter, _ *http.Request, _ string) error {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": f.models()})
	return nil
}

// getModel serves GET /v1/models/{model}.
func (f *Facade) getModel(w http.ResponseWriter, r *http.Request, _ string) error {
	name := r.PathValue("model")
	for _, m := range f.models() {
		if m.ID == name {
			writeJSON(w, http.StatusOK, m)
			return nil
		}
	}
	return modelNotFound(name)
}
