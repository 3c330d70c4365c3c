package config

import (
	"slices"
	"strings"
	"testing"
)

func TestToolApproval(t *testing.T) {
	file := writeConfig(t, `
tools:
  lua:
    - {name: weather, path: ./w.lua, approval: never}
    - {name: admin, path: ./admin, approval: always}
    - {name: plain, path: ./p.lua}
  mcp:
    - {name: github, url: 'https://mcp.example.com/mcp', approval: destructive}
    - {name: files, command: [x]}
  approval:
    - {match: "github_get_*", approval: never}
    - {match: http_fetch, approval: always}
`)
	cfg, err := Load(Overrides{ConfigFile: file}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	var lua, mcp []string
	for _, s := range cfg.Tools.Lua {
		lua = append(lua, s.Approval)
	}
	for _, s := range cfg.Tools.MCP {
		mcp = append(mcp, s.Approval)
	}
	if !slices.Equal(lua, []string{"never", "always", ""}) || !slices.Equal(mcp, []string{"destructive", ""}) {
		t.Errorf("source approvals: lua %q, mcp %q", lua, mcp)
	}
	want := []ApprovalRule{{Match: "github_get_*", Approval: "never"}, {Match: "http_fetch", Approval: "always"}}
	if !slices.Equal(cfg.Tools.Approval, want) {
		t.Errorf("tools.approval = %+v, want %+v", cfg.Tools.Approval, want)
	}

	bad := []struct {
		name, yaml string
		want       []string
	}{
		{"lua value", "tools:\n  lua:\n    - {name: w, path: a, approval: sometimes}\n", []string{"tools.lua[0] (w)", `approval "sometimes"`, "never, always, destructive"}},
		{"mcp value", "tools:\n  mcp:\n    - {name: a, command: [x], approval: Always}\n", []string{"tools.mcp[0] (a)", `approval "Always"`}},
		{"mcp not a string", "tools:\n  mcp:\n    - {name: a, command: [x], approval: [always]}\n", []string{"line 3"}},
		{"rule value", "tools:\n  approval:\n    - {match: 'x_*', approval: yes}\n", []string{"tools.approval[0] (x_*)", `approval "yes"`}},
		{"rule without value", "tools:\n  approval:\n    - {match: 'x_*'}\n", []string{"tools.approval[0] (x_*)", `approval ""`}},
		{"rule glob", "tools:\n  approval:\n    - {match: a, approval: never}\n    - {match: '[', approval: always}\n", []string{"tools.approval[1]", `match glob "["`, "malformed"}},
		{"rule without glob", "tools:\n  approval:\n    - {approval: always}\n", []string{"tools.approval[0]", `match glob ""`}},
		{"rule unknown key", "tools:\n  approval:\n    - {glob: 'x', approval: always}\n", []string{"glob", "line 3"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(Overrides{ConfigFile: writeConfig(t, c.yaml)}, env{}.get)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
