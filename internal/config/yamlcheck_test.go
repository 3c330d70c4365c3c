package config

import (
	"strings"
	"testing"
)

// TestErrorMessages: every error about the file names the key by its path
// and its line; an unknown key suggests the nearest known key of its level
// (or lists them), an unknown provider the nearest provider (and, for
// Ollama, how to configure it). A value given by a flag or variable has no
// line in the file. "FILE" stands for "config <path of the file>".
func TestErrorMessages(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		env   env
		flags Overrides
		want  string
	}{
		{"typo at the top level", "listen: 127.0.0.1:1\nlimts:\n  max_steps: 3\n", nil, Overrides{},
			`FILE: line 2: unknown key "limts"; did you mean "limits"?`},
		{"typo in a section", "limits:\n  max_steps: 3\n  max_stepz: 4\n", nil, Overrides{},
			`FILE: line 3: unknown key "max_stepz" in limits; did you mean "max_steps"?`},
		{"typo in a list entry", "models:\n  - name: a\n    provider: openai\n    modle: x\n", nil, Overrides{},
			`FILE: line 4: unknown key "modle" in models[0]; did you mean "model"?`},
		{"typo in a nested section", "tools:\n  lua_runtime:\n    call_timout: 5s\n", nil, Overrides{},
			`FILE: line 3: unknown key "call_timout" in tools.lua_runtime; did you mean "call_timeout"?`},
		{"typo in an MCP server", "tools:\n  mcp:\n    - name: a\n      command: [x]\n      env: {ANY_NAME: ok}\n      deni: [x]\n", nil, Overrides{},
			`FILE: line 6: unknown key "deni" in tools.mcp[0]; did you mean "deny"?`},
		{"no key near", "price_list: x\n", nil, Overrides{},
			`FILE: line 1: unknown key "price_list"; the keys at the top level are agents, cors, data_dir, database, default_model, engine, files, limits, listen, log_level, models, quotas, structured_output, subagents, tools, webhooks`},
		{"ollama as a provider", "models:\n  - name: local\n    provider: ollama\n    model: llama3.2\n", nil, Overrides{},
			`FILE: line 3: models[0] (local): provider "ollama" is not one of openai, openai-responses, anthropic, echo; Ollama serves the OpenAI API: use provider: openai with base_url: http://127.0.0.1:11434/v1`},
		{"provider typo", "models:\n  - {name: a, provider: antropic, model: x}\n", nil, Overrides{},
			`FILE: line 2: models[0] (a): provider "antropic" is not one of openai, openai-responses, anthropic, echo; did you mean "anthropic"?`},
		{"unknown default_model", "models:\n  - name: quick\n    provider: echo\n  - name: slow\n    provider: echo\ndefault_model: fast\n", nil, Overrides{},
			`FILE: line 6: default_model "fast" is not among the models (quick, slow)`},
		{"model without its id", "models:\n  - name: a\n    provider: openai\n", nil, Overrides{},
			`FILE: line 2: models[0] (a): model (the provider's model id) is required`},
		{"limit", "limits:\n  max_labels: 3\n  max_steps: 0\n", nil, Overrides{},
			`FILE: line 3: limits.max_steps must be positive`},
		{"engine", "engine:\n  lease_ttl: 10s\n  heartbeat: 20s\n", nil, Overrides{},
			`FILE: line 3: engine: heartbeat (20s) must be shorter than lease_ttl (10s)`},
		{"duplicate Lua source", "tools:\n  lua:\n    - {name: w, path: a}\n    - name: w\n      path: b\n", nil, Overrides{},
			`FILE: line 4: tools.lua[1]: name "w" is used twice`},
		{"MCP url", "tools:\n  mcp:\n    - name: a\n      url: 'localhost:3001'\n", nil, Overrides{},
			`FILE: line 4: tools.mcp[0] (a): url "localhost:3001" is not an http(s) URL`},
		{"MCP token unset", "tools:\n  mcp:\n    - name: a\n      url: http://h/mcp\n      bearer_token_env: NOPE\n", nil, Overrides{},
			`FILE: line 5: tools.mcp[0] (a): bearer_token_env: the environment variable NOPE is not set`},
		{"approval rule", "tools:\n  approval:\n    - match: 'x*'\n      approval: sometimes\n", nil, Overrides{},
			`FILE: line 4: tools.approval[0] (x*): approval "sometimes" is not one of never, always, destructive`},
		{"listen", "log_level: warn\nlisten: 8080\n", nil, Overrides{},
			`FILE: line 2: listen "8080": want HOST:PORT, like 127.0.0.1:8080 or :8080`},
		{"wrong type", "limits:\n  max_steps: many\n", nil, Overrides{},
			"FILE: line 2: cannot unmarshal !!str `many` into int"},
		{"log level from the environment", "log_level: warn\n", env{"PARLEY_LOG_LEVEL": "loud"}, Overrides{},
			`config: log_level "loud": want debug, info, warn or error`},
		{"listen from a flag", "listen: 127.0.0.1:1\n", nil, Overrides{Listen: "8080"},
			`config: listen "8080": want HOST:PORT, like 127.0.0.1:8080 or :8080`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fl := c.flags
			fl.ConfigFile = writeConfig(t, c.yaml)
			_, err := Load(fl, c.env.get)
			want := strings.Replace(c.want, "FILE", "config "+fl.ConfigFile, 1)
			if err == nil || err.Error() != want {
				t.Errorf("error\n  %v\nwant\n  %s", err, want)
			}
		})
	}
}

// TestMergeKeys: YAML anchors and merge keys are checked like the keys they
// stand for.
func TestMergeKeys(t *testing.T) {
	file := writeConfig(t, "x-model: &m {provider: openai, model: gpt-5-mini}\n")
	if _, err := Load(Overrides{ConfigFile: file}, env{}.get); err == nil || !strings.Contains(err.Error(), `unknown key "x-model"`) {
		t.Errorf("an unknown top-level key holding an anchor: %v", err)
	}
	file = writeConfig(t, "models:\n  - &m {name: a, provider: openai, model: gpt-5-mini}\n  - {<<: *m, name: b}\n  - {<<: *m, name: c, modle: x}\n")
	_, err := Load(Overrides{ConfigFile: file}, env{}.get)
	if err == nil || !strings.Contains(err.Error(), `line 4: unknown key "modle" in models[2]`) {
		t.Errorf("merge keys: %v", err)
	}
	file = writeConfig(t, "models:\n  - &m {name: a, provider: openai, model: gpt-5-mini}\n  - {<<: *m, name: b}\n")
	cfg, err := Load(Overrides{ConfigFile: file}, env{}.get)
	if err != nil || len(cfg.Models) != 2 || cfg.Models[1].Model != "gpt-5-mini" {
		t.Errorf("merged model: %+v, %v", cfg, err)
	}
}

func TestNearest(t *testing.T) {
	keys := []string{"listen", "limits", "log_level", "models", "tools"}
	for s, want := range map[string]string{"limts": "limits", "lisen": "listen", "model": "models", "tool": "tools", "xyz": "", "loglevel": "log_level", "a": ""} {
		if got := nearest(s, keys); got != want {
			t.Errorf("nearest(%q) = %q, want %q", s, got, want)
		}
	}
}
