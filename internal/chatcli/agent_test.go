package chatcli

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/config"
)

// TestChatAgent: --agent starts the new chat from the agent: its agent
// and version, and the agent's system prompt.
func TestChatAgent(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil, func(c *config.Config) {
		c.Agents = []agent.Agent{{Name: "greeter", Version: 1, Source: agent.SourceConfig,
			Definition: agent.Definition{SystemPrompt: "Greet warmly.", Labels: map[string]string{"from": "agent"}}}}
	})
	p := startChat(t, Options{URL: s.url, Token: s.token, Agent: "greeter"})
	p.send("hello")
	p.waitFor(p.stdout, "echo: hello")
	if err := p.wait(); err != nil {
		t.Fatalf("the session ended with %v\nstderr:\n%s", err, p.stderr)
	}
	code, body := do(t, http.MethodGet, s.url+"/api/v1/chats/"+p.waitChatID(), s.token, "")
	var c struct {
		Agent        string            `json:"agent"`
		AgentVersion int               `json:"agent_version"`
		SystemPrompt string            `json:"system_prompt"`
		Labels       map[string]string `json:"labels"`
	}
	if err := json.Unmarshal([]byte(body), &c); code != http.StatusOK || err != nil {
		t.Fatalf("chat: %d %s", code, body)
	}
	if c.Agent != "greeter" || c.AgentVersion != 1 || c.SystemPrompt != "Greet warmly." || c.Labels["from"] != "agent" {
		t.Fatalf("the chat %s was not made from the agent", body)
	}
}
