package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/parleyhq/parley/client"
)

// TestAgents: the client's agent methods, and a chat made from an agent
// and moved to its latest version.
func TestAgents(t *testing.T) {
	s := newServer(t)
	c := s.client()
	ctx := context.Background()
	a, err := c.CreateAgent(ctx, client.Agent{Name: "helper", SystemPrompt: "Help.", Tools: []string{},
		OutputSchema: json.RawMessage(`{"type":"object"}`), Limits: client.AgentLimits{Timeout: "2m"}})
	if err != nil || a.Version != 1 || a.Source != client.AgentSourceAPI || a.Tools == nil || a.Limits.Timeout != "2m" {
		t.Fatalf("CreateAgent = %+v, %v", a, err)
	}
	_, err = c.CreateAgent(ctx, client.Agent{Name: "helper"})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || apiErr.Code != "agent_exists" {
		t.Fatalf("duplicate: %v", err)
	}
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Agent: "helper", Title: "t"})
	if err != nil || ch.Agent != "helper" || ch.AgentVersion != 1 || ch.SystemPrompt != "Help." {
		t.Fatalf("CreateChat from the agent = %+v, %v", ch, err)
	}
	p, err := c.PatchAgent(ctx, "helper", map[string]any{"system_prompt": "Help more."})
	if err != nil || p.Version != 2 || p.SystemPrompt != "Help more." || p.Limits.Timeout != "2m" {
		t.Fatalf("PatchAgent = %+v, %v", p, err)
	}
	r, err := c.ReplaceAgent(ctx, "helper", client.Agent{SystemPrompt: "Only this."})
	if err != nil || r.Version != 3 || r.Limits.Timeout != "" {
		t.Fatalf("ReplaceAgent = %+v, %v", r, err)
	}
	moved, err := c.UpdateChat(ctx, ch.ID, client.ChatPatch{AgentVersion: "latest"})
	if err != nil || moved.AgentVersion != 3 || moved.SystemPrompt != "Only this." {
		t.Fatalf("UpdateChat latest = %+v, %v", moved, err)
	}
	moved, err = c.UpdateChat(ctx, ch.ID, client.ChatPatch{AgentVersion: "2"})
	if err != nil || moved.AgentVersion != 2 || moved.SystemPrompt != "Help more." {
		t.Fatalf("UpdateChat 2 = %+v, %v", moved, err)
	}
	list, err := c.ListAgents(ctx)
	if err != nil || len(list) != 1 || list[0].Version != 3 {
		t.Fatalf("ListAgents = %+v, %v", list, err)
	}
	vs, err := c.AgentVersions(ctx, "helper")
	if err != nil || len(vs) != 3 || vs[0].SystemPrompt != "Help." {
		t.Fatalf("AgentVersions = %+v, %v", vs, err)
	}
	got, err := c.GetAgent(ctx, "helper")
	if err != nil || got.Version != 3 {
		t.Fatalf("GetAgent = %+v, %v", got, err)
	}
	if err := c.DeleteAgent(ctx, "helper"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetAgent(ctx, "helper"); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("GetAgent after delete: %v", err)
	}
}
