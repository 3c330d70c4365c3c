package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// The agent routes: the owner's agents and the configuration's, which are
// read-only. Another owner's agent is a 404, as if it did not exist.

// agentErr maps the agent errors of the service to their answers; the
// others (validation: 400 naming the field) go on to toAPIError.
func agentErr(err error) error {
	var (
		ex  *service.AgentExistsError
		ro  *service.ReadOnlyError
		use *service.AgentInUseError
		tm  *service.TooManyAgentsError
	)
	switch {
	case errors.As(err, &ex):
		return &apiError{Status: http.StatusConflict, Code: "agent_exists", Message: ex.Error(),
			Details: map[string]any{"field": "name", "name": ex.Name, "source": sourceOf(ex.Config)}}
	case errors.As(err, &ro):
		return &apiError{Status: http.StatusForbidden, Code: "read_only", Message: ro.Error(),
			Details: map[string]any{"name": ro.Name, "source": agent.SourceConfig}}
	case errors.As(err, &use):
		return &apiError{Status: http.StatusConflict, Code: "agent_in_use", Message: use.Error(),
			Details: map[string]any{"name": use.Name, "subagent_of": use.By}}
	case errors.As(err, &tm):
		return &apiError{Status: http.StatusConflict, Code: "too_many_agents", Message: tm.Error(),
			Details: map[string]any{"limit": tm.Limit}}
	case errors.Is(err, store.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "agent not found"}
	}
	return err
}

func sourceOf(config bool) string {
	if config {
		return agent.SourceConfig
	}
	return agent.SourceAPI
}

// decodeAgent reads an agent object from the body: the API's JSON checks
// (size, depth, NUL), then the agent's fields, a wrong one named.
func (a *api) decodeAgent(w http.ResponseWriter, r *http.Request) (agent.Agent, error) {
	var raw json.RawMessage
	if err := a.decode(w, r, &raw); err != nil {
		return agent.Agent{}, err
	}
	var ag agent.Agent
	if err := agent.Decode(raw, &ag); err != nil {
		return agent.Agent{}, err
	}
	return ag, nil
}

func (a *api) createAgent(w http.ResponseWriter, r *http.Request, owner string) error {
	in, err := a.decodeAgent(w, r)
	if err != nil {
		return err
	}
	if err := agent.CheckName(in.Name); err != nil {
		return err
	}
	out, err := a.svc.CreateAgent(r.Context(), owner, in)
	if err != nil {
		return agentErr(err)
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (a *api) listAgents(w http.ResponseWriter, r *http.Request, owner string) error {
	list, err := a.svc.ListAgents(r.Context(), owner)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": list})
	return nil
}

func (a *api) getAgent(w http.ResponseWriter, r *http.Request, owner string) error {
	out, err := a.svc.GetAgent(r.Context(), owner, r.PathValue("name"))
	if err != nil {
		return agentErr(err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *api) putAgent(w http.ResponseWriter, r *http.Request, owner string) error {
	in, err := a.decodeAgent(w, r)
	if err != nil {
		return err
	}
	out, err := a.svc.ReplaceAgent(r.Context(), owner, r.PathValue("name"), in)
	if err != nil {
		return agentErr(err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *api) patchAgent(w http.ResponseWriter, r *http.Request, owner string) error {
	var patch map[string]json.RawMessage
	if err := a.decode(w, r, &patch); err != nil {
		return err
	}
	out, err := a.svc.PatchAgent(r.Context(), owner, r.PathValue("name"), patch)
	if err != nil {
		return agentErr(err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *api) deleteAgent(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := a.svc.DeleteAgent(r.Context(), owner, r.PathValue("name")); err != nil {
		return agentErr(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *api) agentVersions(w http.ResponseWriter, r *http.Request, owner string) error {
	vs, err := a.svc.AgentVersions(r.Context(), owner, r.PathValue("name"))
	if err != nil {
		return agentErr(err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"versions": vs})
	return nil
}
