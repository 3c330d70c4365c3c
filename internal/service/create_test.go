package service

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
)

func TestNewChatTools(t *testing.T) {
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "echo", Provider: "echo", Model: "echo"}}
	cfg.DefaultModel = "echo"
	s := New(nil, nil, &cfg, nil, WithServerTools(namedTools{"weather_now", "http_fetch"}))

	c, _, err := s.newChat("alice", NewChat{})
	if err != nil || c.Tools != nil {
		t.Fatalf("no tools given: %v, tools %#v; want nil (every server-side tool)", err, c.Tools)
	}
	c, _, err = s.newChat("alice", NewChat{Tools: chat.ToolGlobs{}})
	if err != nil || c.Tools == nil || len(c.Tools) != 0 {
		t.Fatalf("tools []: %v, tools %#v; want an empty selection", err, c.Tools)
	}
	_, _, err = s.newChat("alice", NewChat{Tools: chat.ToolGlobs{"weather_*", "x", "[bad"}})
	var ve *chat.ValidationError
	if !errors.As(err, &ve) || ve.Field != "tools[2]" {
		t.Fatalf("malformed glob: %v, want a ValidationError of tools[2]", err)
	}

	globs := chat.ToolGlobs{"weather_*", "x_*", "http_fetch", "nothing"}
	want := []string{`tools[1] "x_*" matches no server-side tool now`, `tools[3] "nothing" matches no server-side tool now`}
	if got := s.toolWarnings(globs); !slices.Equal(got, want) {
		t.Fatalf("warnings %q, want %q", got, want)
	}
	if got := s.toolWarnings(nil); got != nil {
		t.Fatalf("warnings without tools: %q", got)
	}
	if got := New(nil, nil, &cfg, nil).toolWarnings(chat.ToolGlobs{"a"}); len(got) != 1 {
		t.Fatalf("a server without tools warns of every glob: %q", got)
	}
}

// namedTools is a ServerTools of tools without schemas or sources.
type namedTools []string

func (n namedTools) Has(name string) bool         { return slices.Contains(n, name) }
func (n namedTools) Names() []string              { return n }
func (n namedTools) RequiresApproval(string) bool { return false }
func (n namedTools) Describe(name string) (string, string, bool) {
	return "builtin", "", n.Has(name)
}
func (n namedTools) CheckArgs(name string, _ json.RawMessage) (bool, error) { return n.Has(name), nil }
