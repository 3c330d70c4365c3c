package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// withServerTools serves the API with server-side tools of these names.
func withServerTools(t *testing.T, names ...string) func(*setup) {
	reg := tools.NewRegistry(nil)
	for _, n := range names {
		err := reg.AddTool(tool.Func(tool.Decl{Name: n, Description: n, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, tool.Call) (tool.Result, error) { return tool.JSON("ok"), nil }))
		if err != nil {
			t.Fatal(err)
		}
	}
	return func(s *setup) { s.tools = reg }
}

// created is the 201 body of a create: the chat and its warnings.
type created struct {
	chat.Chat
	Warnings []string `json:"warnings"`
}

func TestCreateWithToolSelection(t *testing.T) {
	s := newSQLite(t, withServerTools(t, "weather_now", "weather_week", "github_search_issues", "http_fetch"))
	tok := s.token("alice")

	globs := []string{"weather_*", "github_search_issues"}
	r := s.do("POST", "/api/v1/chats", tok, map[string]any{"tools": globs})
	var c created
	r.expect(t, http.StatusCreated, &c)
	if !slices.Equal(c.Tools, globs) || c.Warnings != nil || strings.Contains(string(r.body), `"warnings"`) {
		t.Fatalf("created with tools: %s", r.body)
	}
	var got chat.Chat
	s.do("GET", "/api/v1/chats/"+c.ID, tok, nil).expect(t, http.StatusOK, &got)
	if !slices.Equal(got.Tools, globs) {
		t.Fatalf("GET tools %q, want %q", got.Tools, globs)
	}
	if l := s.listChats(tok, ""); len(l.Chats) != 1 || !slices.Equal(l.Chats[0].Tools, globs) {
		t.Fatalf("listed: %+v", l.Chats)
	}

	// Without tools (or with null) the chat takes every server-side tool,
	// and shows "tools": null; [] takes none.
	for body, want := range map[string]string{`{}`: `null`, `{"tools":null}`: `null`, `{"tools":[]}`: `[]`} {
		var c chat.Chat
		s.do("POST", "/api/v1/chats", tok, body).expect(t, http.StatusCreated, &c)
		raw := s.do("GET", "/api/v1/chats/"+c.ID, tok, nil)
		var m map[string]json.RawMessage
		raw.expect(t, http.StatusOK, &m)
		if string(m["tools"]) != want {
			t.Errorf("created with %s: GET shows tools %s, want %s", body, m["tools"], want)
		}
	}
}

func TestCreateWarnsOfToolGlobsMatchingNothing(t *testing.T) {
	s := newSQLite(t, withServerTools(t, "weather_now", "http_fetch"))
	tok := s.token("alice")

	var c created
	s.do("POST", "/api/v1/chats", tok, map[string]any{"tools": []string{"weather_*", "x_*", "http_fetch", "github_?"}}).
		expect(t, http.StatusCreated, &c)
	want := []string{`tools[1] "x_*" matches no server-side tool now`, `tools[3] "github_?" matches no server-side tool now`}
	if !slices.Equal(c.Warnings, want) {
		t.Fatalf("warnings %q, want %q", c.Warnings, want)
	}
	// The globs are kept all the same: a source may offer the tools later.
	var got chat.Chat
	s.do("GET", "/api/v1/chats/"+c.ID, tok, nil).expect(t, http.StatusOK, &got)
	if !slices.Equal(got.Tools, []string{"weather_*", "x_*", "http_fetch", "github_?"}) {
		t.Fatalf("stored tools %q", got.Tools)
	}
	// A glob that matches only a dynamic tool of the chat matches no
	// server-side tool either: dynamic tools are not selected by it.
	s.do("POST", "/api/v1/chats", tok, map[string]any{"tools": []string{"ask_*"},
		"dynamic_tools": []map[string]any{{"name": "ask_user", "description": "d", "input_schema": map[string]any{"type": "object"}}}}).
		expect(t, http.StatusCreated, &c)
	if len(c.Warnings) != 1 || len(c.DynamicTools) != 1 {
		t.Fatalf("warnings %q, dynamic tools %+v", c.Warnings, c.DynamicTools)
	}
}

func TestCreateRefusesMalformedToolGlob(t *testing.T) {
	s := newSQLite(t, withServerTools(t, "weather_now"))
	tok := s.token("alice")
	e := s.do("POST", "/api/v1/chats", tok, map[string]any{"message": "hi", "tools": []string{"weather_*", "a", "weather_[now"}}).
		expectError(t, http.StatusBadRequest, "invalid_field")
	if e.Error.Details["field"] != "tools[2]" || !strings.HasPrefix(e.Error.Message, `tools[2]: "weather_[now" is not a valid glob`) {
		t.Fatalf("error %+v", e.Error)
	}
	if l := s.listChats(tok, "?archived=any"); len(l.Chats) != 0 {
		t.Fatalf("a refused create wrote %d chats", len(l.Chats))
	}
}
