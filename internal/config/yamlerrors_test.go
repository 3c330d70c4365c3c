package config

import (
	"strings"
	"testing"
)

// A syntax error is reported at the line the problem is on, and a value
// that is not a duration by its key path.
func TestSyntaxAndValueErrorLines(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"indentation in a list entry", "models:\n  - name: fast\n    provider: echo\n   model: x\n",
			`FILE: line 4: did not find expected '-' indicator`},
		{"indentation of a key", "limits:\n  max_steps: 3\n max_labels: 4\nlisten: :1\n",
			`FILE: line 3: did not find expected key`},
		{"unclosed quote", "listen: :1\nlog_level: \"warn\ndata_dir: x\n",
			`FILE: line 2: found unexpected end of stream`},
		{"bad duration", "engine:\n  lease_ttl: 5x\n",
			`FILE: line 2: engine.lease_ttl: "5x" is not a duration (like 90s or 10m)`},
		{"bad duration in a list", "tools:\n  mcp:\n    - name: a\n      command: [x]\n      connect_timeout: soon\n",
			`FILE: line 5: tools.mcp[0].connect_timeout: "soon" is not a duration (like 90s or 10m)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := writeConfig(t, c.yaml)
			_, err := Load(Overrides{ConfigFile: file}, env{}.get)
			want := strings.Replace(c.want, "FILE", "config "+file, 1)
			if err == nil || err.Error() != want {
				t.Errorf("error\n  %v\nwant\n  %s", err, want)
			}
		})
	}
}
