package config

import (
	"strings"
	"testing"
)

func TestAgentsFromTheFile(t *testing.T) {
	p := writeConfig(t, `
models:
  - {name: fast, provider: echo}
agents:
  - name: researcher
    description: finds things
    model: fast
    system_prompt: You research.
    tools: ["http_*"]
    output_schema:
      type: object
      properties: {answer: {type: string}}
    limits: {max_steps: 5, timeout: 10m}
  - name: lead
    subagents: [researcher]
`)
	cfg, err := Load(Overrides{ConfigFile: p}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Subagents.MaxDepth != 1 {
		t.Errorf("subagents.max_depth = %d, want the default 1", cfg.Subagents.MaxDepth)
	}
	r, ok := cfg.FindAgent("researcher")
	if !ok || r.Source != "config" || r.Version != 1 || r.Model != "fast" || r.Limits.Timeout != "10m" ||
		!strings.Contains(string(r.OutputSchema), `"answer"`) || len(r.Tools) != 1 {
		t.Fatalf("researcher = %+v, found %v", r, ok)
	}
	if l, _ := cfg.FindAgent("lead"); len(l.Subagents) != 1 {
		t.Fatalf("lead = %+v", l)
	}
}

// Every agent of the file is checked at start, each error naming the
// entry and its field.
func TestAgentsCheckedWhole(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown model":    {"agents:\n  - {name: a, model: nope}\n", "agents[0] (a): model:"},
		"bad name":         {"agents:\n  - {name: Big}\n", "agents[0] (Big): name:"},
		"bad glob":         {"agents:\n  - {name: a, tools: ['[']}\n", "agents[0] (a): tools[0]:"},
		"bad schema":       {"agents:\n  - {name: a, output_schema: {type: string}}\n", "agents[0] (a): output_schema:"},
		"remote ref":       {"agents:\n  - {name: a, output_schema: {type: object, $ref: 'https://x.example/s.json'}}\n", "agents[0] (a): output_schema:"},
		"bad timeout":      {"agents:\n  - {name: a, limits: {timeout: soon}}\n", "agents[0] (a): limits.timeout:"},
		"unknown field":    {"agents:\n  - {name: a, modle: x}\n", "agents[0] (a): modle:"},
		"duplicate":        {"agents:\n  - {name: a}\n  - {name: a}\n", "agents[1] (a): name is used by agents[0]"},
		"unknown subagent": {"agents:\n  - {name: a, subagents: [b]}\n", "agents[0] (a): subagents[0]:"},
		"too deep": {"agents:\n  - {name: a, subagents: [b]}\n  - {name: b, subagents: [c]}\n  - {name: c}\n",
			"subagents.max_depth"},
		"depth out of range": {"subagents: {max_depth: -1}\n", "subagents.max_depth -1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(Overrides{ConfigFile: writeConfig(t, tc.yaml)}, env{}.get)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v; want an error containing %q", err, tc.want)
			}
		})
	}
	p := writeConfig(t, "subagents: {max_depth: 2}\nagents:\n  - {name: a, subagents: [b]}\n  - {name: b, subagents: [c]}\n  - {name: c}\n")
	if _, err := Load(Overrides{ConfigFile: p}, env{}.get); err != nil {
		t.Fatalf("two levels under max_depth 2: %v", err)
	}
}

// TestAgentToolsCheckedAgainstTheServer: once the server-side tools are
// known, a file agent's dynamic tool named like one is an error naming the
// entry and the field, and a tools glob matching none is a warning.
func TestAgentToolsCheckedAgainstTheServer(t *testing.T) {
	p := writeConfig(t, `
agents:
  - name: reader
    tools: ["http_*", "search_*"]
  - name: fetcher
    dynamic_tools: [{name: ask, description: asks, input_schema: {type: object}}, {name: http_fetch, description: mine, input_schema: {type: object}}]
`)
	cfg, err := Load(Overrides{ConfigFile: p}, env{}.get)
	if err != nil {
		t.Fatalf("the file alone is valid: %v", err)
	}
	_, err = cfg.CheckAgentTools([]string{"http_fetch"})
	if err == nil || !strings.Contains(err.Error(), `agents[1] (fetcher): dynamic_tools[1].name: "http_fetch" is the name of a server-side tool`) {
		t.Fatalf("error = %v; want the clash named by entry and field", err)
	}
	warnings, err := cfg.CheckAgentTools([]string{"http_get"})
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], `agents[0] (reader): tools[1] "search_*" matches no server-side tool`) {
		t.Fatalf("warnings = %q, %v; want the one glob that matches nothing", warnings, err)
	}
}
