package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/store"
)

// agentList is the body of GET /api/v1/agents.
type agentList struct {
	Agents []agent.Agent `json:"agents"`
}

// versionList is the body of GET /api/v1/agents/{name}/versions.
type versionList struct {
	Versions []agent.Agent `json:"versions"`
}

func (s *server) createAgent(tok string, body map[string]any) agent.Agent {
	s.t.Helper()
	var a agent.Agent
	s.do("POST", "/api/v1/agents", tok, body).expect(s.t, http.StatusCreated, &a)
	return a
}

// TestAgentRoutes walks an agent through every route and status code of
// its life, on both stores.
func TestAgentRoutes(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s := newOn(t, backend)
		alice, bob := s.token("alice"), s.token("bob")

		a := s.createAgent(alice, map[string]any{"name": "researcher", "description": "finds things", "model": "fast",
			"system_prompt": "You research.", "tools": []string{"http_*"}, "labels": map[string]string{"team": "x"},
			"output_schema": map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}},
			"limits":        map[string]any{"max_steps": 4, "timeout": "5m"}})
		if a.Version != 1 || a.Source != "api" || a.Owner != "alice" || a.Model != "fast" || a.Limits.Timeout != "5m" || a.CreatedAt.IsZero() {
			t.Fatalf("created %+v", a)
		}
		s.do("POST", "/api/v1/agents", alice, map[string]any{"name": "researcher"}).expectError(t, http.StatusConflict, "agent_exists")
		s.createAgent(bob, map[string]any{"name": "researcher"}) // names are per owner

		var got agent.Agent
		s.do("GET", "/api/v1/agents/researcher", alice, nil).expect(t, http.StatusOK, &got)
		if got.SystemPrompt != "You research." || got.Version != 1 {
			t.Fatalf("GET = %+v", got)
		}
		s.do("GET", "/api/v1/agents/nobody", alice, nil).expectError(t, http.StatusNotFound, "not_found")

		// PUT replaces every field: what it leaves out is gone.
		var put agent.Agent
		s.do("PUT", "/api/v1/agents/researcher", alice, map[string]any{"system_prompt": "You research well."}).expect(t, http.StatusOK, &put)
		if put.Version != 2 || put.Model != "" || put.Description != "" || put.OutputSchema != nil || !put.CreatedAt.Equal(a.CreatedAt) {
			t.Fatalf("PUT = %+v", put)
		}
		// PATCH changes the fields it gives.
		var patched agent.Agent
		s.do("PATCH", "/api/v1/agents/researcher", alice, map[string]any{"model": "echo", "labels": map[string]string{"k": "v"}}).
			expect(t, http.StatusOK, &patched)
		if patched.Version != 3 || patched.Model != "echo" || patched.SystemPrompt != "You research well." || patched.Labels["k"] != "v" {
			t.Fatalf("PATCH = %+v", patched)
		}
		// The same definition again is no change: no new version.
		var same agent.Agent
		s.do("PATCH", "/api/v1/agents/researcher", alice, map[string]any{"model": "echo"}).expect(t, http.StatusOK, &same)
		if same.Version != 3 {
			t.Fatalf("an unchanged PATCH made version %d", same.Version)
		}
		// What a GET answered can be sent back whole: the server's fields
		// are ignored, and nothing changed makes no version.
		r := s.do("GET", "/api/v1/agents/researcher", alice, nil)
		var back agent.Agent
		s.do("PUT", "/api/v1/agents/researcher", alice, r.body).expect(t, http.StatusOK, &back)
		if back.Version != 3 {
			t.Fatalf("PUT of the agent as read made version %d", back.Version)
		}
		s.do("PUT", "/api/v1/agents/researcher", alice, map[string]any{"name": "other"}).expectError(t, http.StatusBadRequest, "invalid_field")
		s.do("PATCH", "/api/v1/agents/researcher", alice, map[string]any{"name": "other"}).expectError(t, http.StatusBadRequest, "invalid_field")
		s.do("PUT", "/api/v1/agents/nobody", alice, map[string]any{}).expectError(t, http.StatusNotFound, "not_found")
		s.do("PATCH", "/api/v1/agents/nobody", alice, map[string]any{}).expectError(t, http.StatusNotFound, "not_found")

		var vs versionList
		s.do("GET", "/api/v1/agents/researcher/versions", alice, nil).expect(t, http.StatusOK, &vs)
		if len(vs.Versions) != 3 || vs.Versions[0].Version != 1 || vs.Versions[0].SystemPrompt != "You research." ||
			vs.Versions[2].Model != "echo" || vs.Versions[0].CreatedAt.IsZero() {
			t.Fatalf("versions = %+v", vs.Versions)
		}
		var list agentList
		s.do("GET", "/api/v1/agents", alice, nil).expect(t, http.StatusOK, &list)
		if len(list.Agents) != 1 || list.Agents[0].Name != "researcher" || list.Agents[0].Version != 3 {
			t.Fatalf("list = %+v", list.Agents)
		}

		// Another owner's agent is not there for bob (his own is).
		var bobs agent.Agent
		s.do("GET", "/api/v1/agents/researcher", bob, nil).expect(t, http.StatusOK, &bobs)
		if bobs.Owner != "bob" || bobs.Version != 1 {
			t.Fatalf("bob's researcher = %+v", bobs)
		}
		s.do("DELETE", "/api/v1/agents/researcher", bob, nil).expect(t, http.StatusNoContent, nil)
		s.do("GET", "/api/v1/agents/researcher", alice, nil).expect(t, http.StatusOK, nil)
		s.do("GET", "/api/v1/agents/researcher", bob, nil).expectError(t, http.StatusNotFound, "not_found")
		s.do("DELETE", "/api/v1/agents/researcher", bob, nil).expectError(t, http.StatusNotFound, "not_found")
		s.do("GET", "/api/v1/agents/researcher/versions", bob, nil).expectError(t, http.StatusNotFound, "not_found")

		// A deleted name may be taken again; its versions continue.
		again := s.createAgent(bob, map[string]any{"name": "researcher", "description": "again"})
		if again.Version != 2 {
			t.Fatalf("re-created agent has version %d, want 2 (after the deleted one's 1)", again.Version)
		}
	})
}

// TestAgentValidation: each bad field is a 400 naming it, and nothing is
// written.
func TestAgentValidation(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	s.createAgent(tok, map[string]any{"name": "leaf"})
	s.createAgent(tok, map[string]any{"name": "lead", "subagents": []string{"leaf"}})
	for _, tc := range []struct {
		body  string
		field string
	}{
		{`{"name": "Bad Name"}`, "name"},
		{`{"name": ""}`, "name"},
		{`{"name": "a", "model": "nope"}`, "model"},
		{`{"name": "a", "tools": ["["]}`, "tools[0]"},
		{`{"name": "a", "approve": ["ok", "[x"]}`, "approve[1]"},
		{`{"name": "a", "dynamic_tools": [{"name": "t", "input_schema": {"type": "string"}}]}`, "dynamic_tools[0].input_schema"},
		{`{"name": "a", "output_schema": {"type": "string"}}`, "output_schema"},
		{`{"name": "a", "output_schema": {"type": "object", "$ref": "https://example.com/s.json"}}`, "output_schema"},
		{`{"name": "a", "output_schema": {"type": "object", "description": "` + strings.Repeat("x", chat.MaxOutputSchemaBytes) + `"}}`, "output_schema"},
		{`{"name": "a", "limits": {"timeout": "soon"}}`, "limits.timeout"},
		{`{"name": "a", "limits": {"max_steps": -1}}`, "limits.max_steps"},
		{`{"name": "a", "subagents": ["ghost"]}`, "subagents[0]"},
		{`{"name": "a", "subagents": ["lead"]}`, "subagents"}, // lead has subagents: two levels
		{`{"name": "a", "labels": {"": "x"}}`, "labels"},
		{`{"name": "a", "model": 5}`, "model"},
		{`{"name": "a", "modle": "echo"}`, "modle"},
	} {
		e := s.do("POST", "/api/v1/agents", tok, tc.body).expectError(t, http.StatusBadRequest, "invalid_field")
		if e.Error.Details["field"] != tc.field {
			t.Errorf("%s: field %v, want %s (%s)", tc.body, e.Error.Details["field"], tc.field, e.Error.Message)
		}
	}
	// The other direction: an agent others delegate to may not get
	// subagents of its own.
	e := s.do("PATCH", "/api/v1/agents/leaf", tok, map[string]any{"subagents": []string{"lead"}}).
		expectError(t, http.StatusBadRequest, "invalid_field")
	if e.Error.Details["field"] != "subagents" {
		t.Fatalf("field %v", e.Error.Details["field"])
	}
	s.createAgent(tok, map[string]any{"name": "other"})
	e = s.do("PATCH", "/api/v1/agents/leaf", tok, map[string]any{"subagents": []string{"other"}}).
		expectError(t, http.StatusBadRequest, "invalid_field")
	if !strings.Contains(e.Error.Message, `"lead"`) {
		t.Fatalf("the message does not name the agent that delegates: %s", e.Error.Message)
	}
	// A subagent is not deleted from under the agent that names it.
	s.do("DELETE", "/api/v1/agents/leaf", tok, nil).expectError(t, http.StatusConflict, "agent_in_use")
	var list agentList
	s.do("GET", "/api/v1/agents", tok, nil).expect(t, http.StatusOK, &list)
	if len(list.Agents) != 3 {
		t.Fatalf("agents after the refusals: %+v", list.Agents)
	}
	big := `{"name": "a", "system_prompt": "` + strings.Repeat("x", int(s.cfg.Limits.MaxBodyBytes)) + `"}`
	s.do("POST", "/api/v1/agents", tok, big).expectError(t, http.StatusRequestEntityTooLarge, "body_too_large")
}

// configAgent is an agent as the configuration file gives it.
func configAgent(name, model, prompt string) agent.Agent {
	return agent.Agent{Name: name, Version: 1, Source: agent.SourceConfig,
		Definition: agent.Definition{Model: model, SystemPrompt: prompt, Labels: map[string]string{}, Subagents: []string{}}}
}

// TestConfigAgents: the file's agents are every owner's to use and
// nobody's to change.
func TestConfigAgents(t *testing.T) {
	s := newSQLite(t, func(su *setup) { su.cfg.Agents = []agent.Agent{configAgent("helper", "echo", "Help.")} })
	alice, bob := s.token("alice"), s.token("bob")
	for _, tok := range []string{alice, bob} {
		var list agentList
		s.do("GET", "/api/v1/agents", tok, nil).expect(t, http.StatusOK, &list)
		if len(list.Agents) != 1 || list.Agents[0].Source != "config" || list.Agents[0].Version != 1 {
			t.Fatalf("list = %+v", list.Agents)
		}
		var vs versionList
		s.do("GET", "/api/v1/agents/helper/versions", tok, nil).expect(t, http.StatusOK, &vs)
		if len(vs.Versions) != 1 {
			t.Fatalf("versions = %+v", vs.Versions)
		}
	}
	s.do("PUT", "/api/v1/agents/helper", alice, map[string]any{}).expectError(t, http.StatusForbidden, "read_only")
	s.do("PATCH", "/api/v1/agents/helper", alice, map[string]any{"model": "fast"}).expectError(t, http.StatusForbidden, "read_only")
	s.do("DELETE", "/api/v1/agents/helper", alice, nil).expectError(t, http.StatusForbidden, "read_only")
	e := s.do("POST", "/api/v1/agents", alice, map[string]any{"name": "helper"}).expectError(t, http.StatusConflict, "agent_exists")
	if e.Error.Details["source"] != "config" {
		t.Fatalf("details %v", e.Error.Details)
	}
	// An owner's agent may delegate to a configured one.
	s.createAgent(alice, map[string]any{"name": "lead", "subagents": []string{"helper"}})
	c := s.createChat(bob, map[string]any{"agent": "helper"})
	if c.Agent != "helper" || c.AgentVersion != 1 || c.SystemPrompt != "Help." {
		t.Fatalf("chat from a configured agent = %+v", c)
	}
	var moved chat.Chat
	s.do("PATCH", "/api/v1/chats/"+c.ID, bob, map[string]any{"agent_version": 1}).expect(t, http.StatusOK, &moved)
	if moved.AgentVersion != 1 || moved.SystemPrompt != "Help." {
		t.Fatalf("moved = %+v", moved)
	}
	s.do("PATCH", "/api/v1/chats/"+c.ID, bob, map[string]any{"agent_version": 2}).expectError(t, http.StatusBadRequest, "invalid_field")
	// A chat that has work in progress does not move (no engine runs here).
	s.force(c.ID, nil, store.Transition{From: chat.Waiting, To: chat.Pending})
	s.do("PATCH", "/api/v1/chats/"+c.ID, bob, map[string]any{"agent_version": "latest"}).expectError(t, http.StatusConflict, "status_conflict")
}

// twoModels is a live configuration with two models on the fake: "fake"
// (gpt-test) and "other" (gpt-other).
func twoModels(su *setup) {
	su.cfg.Models = append(su.cfg.Models, config.Model{Name: "other", Provider: "openai", Model: "gpt-other", BaseURL: su.cfg.Models[0].BaseURL, APIKeyEnv: fakeKeyEnv})
}

// sent is what one request to the fake model asked for.
type sent struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func lastRequest(t *testing.T, fake *llmtest.OpenAIChat) sent {
	t.Helper()
	reqs := fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	var r sent
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r sent) system() string {
	for _, m := range r.Messages {
		if m.Role == "system" || m.Role == "developer" {
			var s string
			if json.Unmarshal(m.Content, &s) == nil {
				return s
			}
			return string(m.Content)
		}
	}
	return ""
}

// TestChatFromAgent: a chat made from an agent runs with its model, system
// prompt and tools; the request's fields win over the agent's.
func TestChatFromAgent(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		fake := llmtest.NewOpenAIChat(t)
		s := newOn(t, backend, func(su *setup) { su.cfg = liveConfig(fake.URL) }, twoModels)
		s.live = true
		runEngine(t, s)
		alice, bob := s.token("alice"), s.token("bob")
		s.createAgent(alice, map[string]any{"name": "researcher", "model": "other", "system_prompt": "You research.",
			"labels":        map[string]string{"team": "x", "kind": "agent"},
			"dynamic_tools": []map[string]any{{"name": "lookup", "description": "looks up", "input_schema": map[string]any{"type": "object"}}},
			"output_schema": map[string]any{"type": "object"}})

		fake.Push(llmtest.Turn{Text: `{"found": true}`})
		c := s.createChat(alice, map[string]any{"agent": "researcher", "message": "find it", "title": "t", "labels": map[string]string{"kind": "mine"}})
		if c.Agent != "researcher" || c.AgentVersion != 1 || c.Model != "other" || c.SystemPrompt != "You research." ||
			c.Labels["team"] != "x" || c.Labels["kind"] != "mine" || len(c.DynamicTools) != 1 {
			t.Fatalf("chat = %+v", c)
		}
		if c.ResponseFormat == nil || c.ResponseFormat.JSONSchema.Name != "researcher" {
			t.Fatalf("response_format = %+v, want the agent's output schema", c.ResponseFormat)
		}
		s.waitFor(alice, c.ID, chat.Waiting)
		r := lastRequest(t, fake)
		if r.Model != "gpt-other" || r.system() != "You research." || len(r.Tools) != 1 || r.Tools[0].Function.Name != "lookup" {
			t.Fatalf("the model was asked %+v (system %q)", r, r.system())
		}
		var read chat.Chat
		s.do("GET", "/api/v1/chats/"+c.ID, alice, nil).expect(t, http.StatusOK, &read)
		if read.Agent != "researcher" || read.AgentVersion != 1 || read.ResponseFormat == nil ||
			read.ResponseFormat.JSONSchema.Name != "researcher" || string(read.Output) != `{"found":true}` {
			t.Fatalf("read back = agent %q v%d, format %+v, output %s", read.Agent, read.AgentVersion, read.ResponseFormat, read.Output)
		}

		// The request's fields override the agent's, its format among them.
		fake.Push(llmtest.Turn{Text: "ok"})
		o := s.createChat(alice, map[string]any{"agent": "researcher", "model": "fake", "system_prompt": "Be brief.",
			"dynamic_tools": []any{}, "message": "hi", "title": "t", "response_format": map[string]any{"type": "text"}})
		s.waitFor(alice, o.ID, chat.Waiting)
		r = lastRequest(t, fake)
		if o.Model != "fake" || r.Model != "gpt-test" || r.system() != "Be brief." || len(r.Tools) != 0 {
			t.Fatalf("overridden chat %+v asked %+v", o, r)
		}

		for _, tc := range []struct{ tok, name string }{{alice, "ghost"}, {bob, "researcher"}} {
			e := s.do("POST", "/api/v1/chats", tc.tok, map[string]any{"agent": tc.name}).expectError(t, http.StatusBadRequest, "invalid_field")
			if e.Error.Details["field"] != "agent" {
				t.Fatalf("field %v", e.Error.Details["field"])
			}
		}
	})
}

// TestChatAgentVersion: PATCH /chats/{id} agent_version moves a chat
// between its agent's versions; a deleted agent's chat keeps running on
// its version and moves nowhere.
func TestChatAgentVersion(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		fake := llmtest.NewOpenAIChat(t)
		s := newOn(t, backend, func(su *setup) { su.cfg = liveConfig(fake.URL) }, twoModels)
		s.live = true
		runEngine(t, s)
		alice := s.token("alice")
		s.createAgent(alice, map[string]any{"name": "writer", "system_prompt": "v1"})
		c := s.createChat(alice, map[string]any{"agent": "writer"})
		s.do("PATCH", "/api/v1/agents/writer", alice, map[string]any{"system_prompt": "v2", "model": "other", "tools": []string{}}).expect(t, http.StatusOK, nil)

		var moved chat.Chat
		s.do("PATCH", "/api/v1/chats/"+c.ID, alice, map[string]any{"agent_version": "latest"}).expect(t, http.StatusOK, &moved)
		if moved.AgentVersion != 2 || moved.SystemPrompt != "v2" || moved.Model != "other" || moved.Tools == nil || len(moved.Tools) != 0 {
			t.Fatalf("moved to latest: %+v", moved)
		}
		s.do("PATCH", "/api/v1/chats/"+c.ID, alice, map[string]any{"agent_version": 1}).expect(t, http.StatusOK, &moved)
		if moved.AgentVersion != 1 || moved.SystemPrompt != "v1" || moved.Model != "fake" || moved.Tools != nil {
			t.Fatalf("moved to 1: %+v", moved)
		}
		for _, v := range []any{9, 0, "newest"} {
			e := s.do("PATCH", "/api/v1/chats/"+c.ID, alice, map[string]any{"agent_version": v}).expectError(t, http.StatusBadRequest, "invalid_field")
			if e.Error.Details["field"] != "agent_version" {
				t.Fatalf("field %v", e.Error.Details["field"])
			}
		}
		plain := s.createChat(alice, map[string]any{})
		s.do("PATCH", "/api/v1/chats/"+plain.ID, alice, map[string]any{"agent_version": "latest"}).expectError(t, http.StatusBadRequest, "invalid_field")

		// Deleted: the chat runs on, on its version, and moves nowhere.
		s.do("DELETE", "/api/v1/agents/writer", alice, nil).expect(t, http.StatusNoContent, nil)
		fake.Push(llmtest.Turn{Text: "still here"})
		s.postText(alice, c.ID, "hello")
		after := s.waitFor(alice, c.ID, chat.Waiting)
		if after.Agent != "writer" || after.AgentVersion != 1 || lastRequest(t, fake).system() != "v1" {
			t.Fatalf("the deleted agent's chat: %+v", after)
		}
		for _, v := range []any{"latest", 2} {
			e := s.do("PATCH", "/api/v1/chats/"+c.ID, alice, map[string]any{"agent_version": v}).expectError(t, http.StatusBadRequest, "invalid_field")
			if !strings.Contains(e.Error.Message, "deleted") {
				t.Fatalf("message %q does not say the agent was deleted", e.Error.Message)
			}
		}
		s.do("GET", "/api/v1/chats/"+c.ID, alice, nil).expect(t, http.StatusOK, nil)
		e := s.do("POST", "/api/v1/chats", alice, map[string]any{"agent": "writer"}).expectError(t, http.StatusBadRequest, "invalid_field")
		if e.Error.Details["field"] != "agent" {
			t.Fatalf("field %v", e.Error.Details["field"])
		}
	})
}

// TestAISDKAgent: parley.agent makes the app's chat from the agent; its
// system prompt reaches the model, and the request's labels join the
// agent's.
func TestAISDKAgent(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	s := newLive(t, fake)
	tok := s.token("alice")
	s.createAgent(tok, map[string]any{"name": "support", "system_prompt": "You support.", "labels": map[string]string{"team": "help"}})
	fake.Push(llmtest.Turn{Text: "How can I help?"})
	cs, done := uiChunks(t, s, tok, map[string]any{"id": "app-1", "trigger": "submit-message", "messages": []any{userMsg("hi")},
		"parley": map[string]any{"agent": "support", "title": "t"}})
	if !done || cs[len(cs)-1]["finishReason"] != "stop" {
		t.Fatalf("chunks = %v", cs)
	}
	chats := s.listChats(tok, "?label=ai-sdk-chat:app-1").Chats
	if len(chats) != 1 || chats[0].Agent != "support" || chats[0].AgentVersion != 1 || chats[0].Labels["team"] != "help" || chats[0].Labels["api"] != "ai-sdk" {
		t.Fatalf("chats of app-1 = %+v", chats)
	}
	if got := lastRequest(t, fake).system(); got != "You support." {
		t.Fatalf("system prompt %q, want the agent's", got)
	}
	s.do("POST", "/api/v1/ai-sdk/chat", tok, map[string]any{"id": "app-2", "messages": []any{userMsg("hi")},
		"parley": map[string]any{"agent": "nobody"}}).expectError(t, http.StatusBadRequest, "invalid_field")
}

// TestAgentMaxSteps: an agent's limits.max_steps caps each run of its
// chats below the server's limit; above the server's limit it is refused.
func TestAgentMaxSteps(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	s := newLive(t, fake, withServerTools(t, "lookup"))
	tok := s.token("alice")
	e := s.do("POST", "/api/v1/agents", tok, map[string]any{"name": "a", "limits": map[string]any{"max_steps": s.cfg.Limits.MaxSteps + 1}}).
		expectError(t, http.StatusBadRequest, "invalid_field")
	if e.Error.Details["field"] != "limits.max_steps" {
		t.Fatalf("field %v", e.Error.Details["field"])
	}
	s.createAgent(tok, map[string]any{"name": "brief", "limits": map[string]any{"max_steps": 1}})
	// The first model call asks for a tool; a second call would pass the
	// agent's limit of one.
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "lookup", Args: `{}`}}})
	c := s.createChat(tok, map[string]any{"agent": "brief", "message": "go", "title": "t"})
	got := s.waitFor(tok, c.ID, chat.Error)
	if got.LastError == nil || got.LastError.Kind != "max_steps" || !strings.Contains(got.LastError.Message, "limit of 1 model calls") {
		t.Fatalf("last_error = %+v", got.LastError)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
}

// TestConfigAgentHidesOwnersAgent: an owner's agent whose name the
// configuration file takes later (a restart with a new agents: entry) is
// hidden: the list shows the name once, as the file's agent, and reads and
// new chats get the file's; PUT and PATCH stay read_only, but DELETE
// deletes the owner's own agent, and then is read_only as for any
// configured agent. Another owner, without a clash, sees the file's agent.
func TestConfigAgentHidesOwnersAgent(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		alice, bob := s.token("alice"), s.token("bob")
		ctx := context.Background()
		// alice wrote "helper" before the file had it.
		if err := s.st.InTx(ctx, func(tx store.Tx) error {
			return tx.PutAgentVersion(ctx, &agent.Agent{Name: "helper", Owner: "alice", Source: agent.SourceAPI, Version: 1,
				Definition: agent.Definition{SystemPrompt: "alice's own.", Labels: map[string]string{}, Subagents: []string{}}})
		}); err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{alice, bob} {
			var list agentList
			s.do("GET", "/api/v1/agents", tok, nil).expect(t, http.StatusOK, &list)
			if len(list.Agents) != 1 || list.Agents[0].Source != "config" || list.Agents[0].SystemPrompt != "Help." {
				t.Fatalf("list = %+v; want the name once, as the file's agent", list.Agents)
			}
			var got agent.Agent
			s.do("GET", "/api/v1/agents/helper", tok, nil).expect(t, http.StatusOK, &got)
			if got.Source != "config" {
				t.Fatalf("GET = %+v; want the file's agent", got)
			}
			if c := s.createChat(tok, map[string]any{"agent": "helper"}); c.SystemPrompt != "Help." {
				t.Fatalf("chat from helper = %+v; want the file's agent", c)
			}
		}
		s.do("PUT", "/api/v1/agents/helper", alice, map[string]any{}).expectError(t, http.StatusForbidden, "read_only")
		s.do("PATCH", "/api/v1/agents/helper", alice, map[string]any{"model": "fast"}).expectError(t, http.StatusForbidden, "read_only")
		s.do("DELETE", "/api/v1/agents/helper", bob, nil).expectError(t, http.StatusForbidden, "read_only")
		s.do("DELETE", "/api/v1/agents/helper", alice, nil).expect(t, http.StatusNoContent, nil)
		if own, err := s.st.ListAgents(ctx, "alice"); err != nil || len(own) != 0 {
			t.Fatalf("alice's agents after the DELETE = %+v, %v; want none", own, err)
		}
		s.do("DELETE", "/api/v1/agents/helper", alice, nil).expectError(t, http.StatusForbidden, "read_only")
		var got agent.Agent
		s.do("GET", "/api/v1/agents/helper", alice, nil).expect(t, http.StatusOK, &got)
		if got.Source != "config" {
			t.Fatalf("GET after the DELETE = %+v; want the file's agent still", got)
		}
	}, func(su *setup) { su.cfg.Agents = []agent.Agent{configAgent("helper", "echo", "Help.")} })
}
