package config

import (
	"reflect"
	"testing"
)

// TestMCPChildEnvironment: a stdio MCP server gets the basic variables,
// those named in pass_env and those set in env, and nothing else of
// parley's environment (its provider keys stay out).
func TestMCPChildEnvironment(t *testing.T) {
	file := writeConfig(t, `
tools:
  mcp:
    - name: gh
      command: [gh-mcp]
      pass_env: [GITHUB_TOKEN]
      env: {LOG_LEVEL: debug, HOME: /srv/gh}
`)
	cfg, err := Load(Overrides{ConfigFile: file}, env{"PATH": "/usr/bin", "HOME": "/root", "GITHUB_TOKEN": "ghp_x", "OPENAI_API_KEY": "sk-secret"}.get)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"PATH": "/usr/bin", "HOME": "/srv/gh", "GITHUB_TOKEN": "ghp_x", "LOG_LEVEL": "debug"}
	if got := cfg.Tools.MCP[0].ChildEnv; !reflect.DeepEqual(got, want) {
		t.Fatalf("child environment %v, want %v", got, want)
	}
	if _, err := Load(Overrides{ConfigFile: file}, env{"PATH": "/usr/bin"}.get); err == nil {
		t.Fatal("pass_env naming an unset variable loaded")
	}
}
