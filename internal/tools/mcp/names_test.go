package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:8]
}

func TestToolNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	tests := []struct {
		name     string
		server   string
		mcpNames []string
		want     []string
	}{
		{"plain", "gh", []string{"search", "get-issue"}, []string{"gh_search", "gh_get-issue"}},
		{"sanitised", "my.server", []string{"a.b/c", "ünï"}, []string{"my_server_a_b_c", "my_server__n_"}},
		{"too long", "s", []string{long}, []string{"s_" + strings.Repeat("x", 53) + "_" + hash8(long)}},
		// "a_b" needed no change, so it keeps its name; "a.b" and "a b" are
		// altered and would clash with it, so they get their hashes.
		{"collision", "s", []string{"a.b", "a_b", "a b"}, []string{"s_a_b_" + hash8("a.b"), "s_a_b", "s_a_b_" + hash8("a b")}},
		{"collision, order swapped", "s", []string{"a_b", "a.b"}, []string{"s_a_b", "s_a_b_" + hash8("a.b")}},
		{"exactly 64", "s", []string{strings.Repeat("y", 62)}, []string{"s_" + strings.Repeat("y", 62)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := toolNames(tt.server, tt.mcpNames)
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
			for _, n := range got {
				if !validName.MatchString(n) {
					t.Errorf("%q is not a valid tool name", n)
				}
			}
		})
	}
}

// The same MCP tool keeps its name however the rest of the list changes, as
// long as it does not meet a clash that it is the altered side of.
func TestToolNamesAreStable(t *testing.T) {
	long := strings.Repeat("z", 80)
	a := toolNames("srv", []string{long, "x"})
	b := toolNames("srv", []string{"y", long})
	if a[0] != b[1] {
		t.Fatalf("%q then %q", a[0], b[1])
	}
	if len(a[0]) != 64 {
		t.Fatalf("%q has %d characters", a[0], len(a[0]))
	}
}

func TestBuildCatalogAllowDeny(t *testing.T) {
	var tools []*mcp.Tool
	for _, n := range []string{"read_file", "write_file", "delete_file", "search", "bad_schema"} {
		schema := any(map[string]any{"type": "object"})
		if n == "bad_schema" {
			schema = map[string]any{"type": "string"}
		}
		tools = append(tools, &mcp.Tool{Name: n, InputSchema: schema})
	}
	log := slog.New(slog.DiscardHandler)
	tests := []struct {
		allow, deny []string
		want        string
	}{
		{nil, nil, "fs_read_file,fs_write_file,fs_delete_file,fs_search"},
		{[]string{"*_file"}, nil, "fs_read_file,fs_write_file,fs_delete_file"},
		{[]string{"*_file"}, []string{"delete_*"}, "fs_read_file,fs_write_file"},
		{nil, []string{"*"}, ""},
		{[]string{"search", "read_?ile"}, []string{"search"}, "fs_read_file"},
	}
	for _, tt := range tests {
		c := buildCatalog("fs", tools, tt.allow, tt.deny, log)
		if got := names(c.decls); got != tt.want {
			t.Errorf("allow %q deny %q: %q, want %q", tt.allow, tt.deny, got, tt.want)
		}
		for _, d := range c.decls {
			if c.byName[d.Name].mcpName != strings.TrimPrefix(d.Name, "fs_") {
				t.Errorf("%s maps to %q", d.Name, c.byName[d.Name].mcpName)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string // "" = valid
	}{
		{Config{Name: "a", Command: []string{"x"}}, ""},
		{Config{Name: "a", URL: "http://h/mcp"}, ""},
		{Config{Name: "a"}, "neither a command nor a URL"},
		{Config{Name: "a", Command: []string{"x"}, URL: "http://h"}, "both a command and a URL"},
		{Config{Command: []string{"x"}}, "the name is empty"},
		{Config{Name: "a", URL: "http://h", Allow: []string{"[a"}}, `tool pattern "[a"`},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v", tt.cfg, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: %v, want %q", tt.cfg, err, tt.want)
		}
	}
}
