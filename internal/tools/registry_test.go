package tools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/tool"
)

func TestRegistryDecls(t *testing.T) {
	reg := newRegistry(t, []tool.Tool{echoTool("dice", nil), tool.Func(tool.Decl{Name: "ping", Description: "no args"}, nil)},
		newFakeSource("lua", "l_one", "l_two"), newFakeSource("mcp", "m_one"))
	var got []string
	for _, d := range reg.Decls(context.Background()) {
		got = append(got, d.Source+"/"+d.Name)
	}
	want := []string{"builtin/dice", "builtin/ping", "lua/l_one", "lua/l_two", "mcp/m_one"}
	if !slices.Equal(got, want) {
		t.Fatalf("decls %v, want %v", got, want)
	}
	ping := reg.Decls(context.Background())[1]
	if string(ping.InputSchema) != string(emptySchema) {
		t.Errorf("a tool without schema is listed with %s", ping.InputSchema)
	}
	b, _ := json.Marshal(ping)
	if !strings.Contains(string(b), `"source":"builtin"`) || !strings.Contains(string(b), `"input_schema":{`) {
		t.Errorf("JSON of a decl: %s", b)
	}
	for _, name := range []string{"dice", "ping", "l_two", "m_one"} {
		if !reg.Has(name) {
			t.Errorf("Has(%q) = false", name)
		}
	}
	if reg.Has("nope") {
		t.Error(`Has("nope") = true`)
	}
}

func TestRegistryRefusesClashesAndBadDecls(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t, []tool.Tool{echoTool("dice", nil)}, newFakeSource("lua", "l_one"))

	cases := []struct {
		name string
		add  func() error
		want string
	}{
		{"tool vs tool", func() error { return reg.AddTool(echoTool("dice", nil)) }, "already used by a built-in tool"},
		{"tool vs source", func() error { return reg.AddTool(echoTool("l_one", nil)) }, `already used by tool source "lua"`},
		{"source vs tool", func() error { return reg.AddSource(ctx, newFakeSource("mcp", "m_one", "dice")) }, "already used by a built-in tool"},
		{"source vs source", func() error { return reg.AddSource(ctx, newFakeSource("mcp", "l_one")) }, `already used by tool source "lua"`},
		{"twice in one source", func() error { return reg.AddSource(ctx, newFakeSource("mcp", "m_one", "m_one")) }, "declared twice"},
		{"source name taken", func() error { return reg.AddSource(ctx, newFakeSource("lua", "other")) }, "already registered"},
		{"source named builtin", func() error { return reg.AddSource(ctx, newFakeSource("builtin", "other")) }, "not \"builtin\""},
		{"bad name", func() error { return reg.AddTool(echoTool("has space", nil)) }, "must match"},
		{"bad schema", func() error {
			return reg.AddTool(tool.Func(tool.Decl{Name: "x", InputSchema: json.RawMessage(`{"type":"string"}`)}, nil))
		}, "must describe an object"},
		{"schema not JSON", func() error {
			return reg.AddTool(tool.Func(tool.Decl{Name: "x", InputSchema: json.RawMessage(`{`)}, nil))
		}, "not valid JSON"},
		{"invalid schema", func() error {
			return reg.AddTool(tool.Func(tool.Decl{Name: "x", InputSchema: json.RawMessage(`{"type":"object","minProperties":"two"}`)}, nil))
		}, "not a valid JSON Schema"},
		{"list fails", func() error {
			s := newFakeSource("mcp")
			s.listErr = errors.New("not started")
			return reg.AddSource(ctx, s)
		}, "not started"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.add()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	var got []string
	for _, d := range reg.Decls(ctx) {
		got = append(got, d.Name)
	}
	if !slices.Equal(got, []string{"dice", "l_one"}) {
		t.Fatalf("refused registrations left tools behind: %v", got)
	}
}

// TestRegistryRefreshKeepsPreviousListOnClash: a source's new list that
// clashes, or cannot be read, is refused with an error and the source keeps
// its previous list; a later valid list is adopted.
func TestRegistryRefreshKeepsPreviousListOnClash(t *testing.T) {
	ctx := context.Background()
	lua := newFakeSource("lua", "l_one")
	mcp := newFakeSource("mcp", "m_one")
	reg := newRegistry(t, []tool.Tool{echoTool("dice", nil)}, lua, mcp)

	mcp.setDecls(tool.Decl{Name: "m_two"}, tool.Decl{Name: "l_one"})
	err := reg.Refresh(ctx)
	if err == nil || !strings.Contains(err.Error(), `tool source "mcp"`) || !strings.Contains(err.Error(), `already used by tool source "lua"`) {
		t.Fatalf("refresh err = %v", err)
	}
	if !reg.Has("m_one") || reg.Has("m_two") {
		t.Fatal("the clashing list replaced the previous one")
	}
	if d := reg.Decls(ctx); d[1].Source != "lua" || d[1].Name != "l_one" {
		t.Fatalf("l_one moved: %+v", d)
	}

	mcp.mu.Lock()
	mcp.listErr = errors.New("connection lost")
	mcp.mu.Unlock()
	if err := reg.Refresh(ctx); err == nil || !strings.Contains(err.Error(), "connection lost") {
		t.Fatalf("refresh err = %v", err)
	}
	if !reg.Has("m_one") {
		t.Fatal("an unreadable list dropped the previous one")
	}

	mcp.mu.Lock()
	mcp.listErr = nil
	mcp.mu.Unlock()
	mcp.setDecls() // every tool removed: an empty list is a valid list
	if err := reg.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if reg.Has("m_one") {
		t.Fatal("the empty list was not adopted")
	}
	mcp.setDecls(tool.Decl{Name: "m_two"})
	if err := reg.Refresh(ctx); err != nil || !reg.Has("m_two") {
		t.Fatalf("a valid list was not adopted: %v", err)
	}
}

func TestRegistryClose(t *testing.T) {
	a, b := newFakeSource("a"), newFakeSource("b")
	reg := newRegistry(t, nil, a, b)
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if !a.closed || !b.closed {
		t.Fatal("a source was not closed")
	}
}
