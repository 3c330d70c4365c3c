package api

import (
	"context"
	"net/http"
	"time"

	"github.com/parleyhq/parley/internal/tools"
)

// readyTimeout bounds the database check of /readyz.
const readyTimeout = 2 * time.Second

// healthz answers while the process serves HTTP.
func (a *api) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz answers 200 when the database answers, 503 otherwise.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := a.st.Ping(ctx); err != nil {
		a.log.Warn("not ready: database does not answer", "err", err)
		return &apiError{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: "the database does not answer"}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

// modelInfo is a configured model as clients see it: no keys, no URLs.
type modelInfo struct {
	Name          string   `json:"name"`
	Provider      string   `json:"provider"`
	Model         string   `json:"model"`
	Default       bool     `json:"default"`
	Inputs        []string `json:"inputs"`         // the kinds of content it takes: text, image, pdf
	ContextWindow *int64   `json:"context_window"` // in tokens; null when unknown
}

// listModels answers the configured models, the default marked, each with
// what it takes.
func (a *api) listModels(w http.ResponseWriter, r *http.Request, owner string) error {
	models := make([]modelInfo, len(a.cfg.Models))
	for i, m := range a.cfg.Models {
		models[i] = modelInfo{Name: m.Name, Provider: m.Provider, Model: m.Model, Default: m.Name == a.cfg.DefaultModel,
			Inputs: m.InputKinds(), ContextWindow: m.KnownWindow()}
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": models})
	return nil
}

// listTools answers the server-side tools: built-in ones and those of every
// source, each with the source it belongs to, and the state of every source
// (a remote one may be connecting, or failed with its last error).
func (a *api) listTools(w http.ResponseWriter, r *http.Request, owner string) error {
	decls := []tools.Decl{}
	sources := []tools.SourceInfo{}
	if a.tools != nil {
		decls = append(decls, a.tools.Decls(r.Context())...)
		sources = append(sources, a.tools.Sources()...)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": decls, "sources": sources})
	return nil
}
