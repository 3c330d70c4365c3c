package lua

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyhq/parley/tool"
)

func TestToolAnnotations(t *testing.T) {
	s := openSource(t, `
tool{name = "look", annotations = {readOnlyHint = true, destructiveHint = false}, handler = function() return 1 end}
tool{name = "all", annotations = {readOnlyHint = false, destructiveHint = true, idempotentHint = true, openWorldHint = false}, handler = function() end}
tool{name = "empty", annotations = {}, handler = function() end}
tool{name = "plain", handler = function() end}
`)
	decls, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	want := map[string]*tool.Annotations{
		"look":  tool.ReadOnly(),
		"all":   {ReadOnlyHint: &no, DestructiveHint: &yes, IdempotentHint: &yes, OpenWorldHint: &no},
		"empty": {},
		"plain": nil,
	}
	if len(decls) != len(want) {
		t.Fatalf("%d tools, want %d", len(decls), len(want))
	}
	for _, d := range decls {
		if !d.Annotations.Equal(want[d.Name]) {
			t.Errorf("%s: annotations %+v, want %+v", d.Name, d.Annotations, want[d.Name])
		}
	}
	if got := okJSON(t, invokeOne(t, s, "look", `{}`)); got != "1" {
		t.Errorf("look: %s", got)
	}
}

func TestToolAnnotationsRefused(t *testing.T) {
	cases := []struct{ code, want string }{
		{"tool{name = 'x', handler = function() end, annotations = true}",
			`main.lua:1: tool{} "x": annotations must be a table like {readOnlyHint = true}, not a boolean`},
		{"\ntool{name = 'x', handler = function() end, annotations = {readOnly = true}}",
			`main.lua:2: tool{} "x": annotations: unknown hint readOnly (want readOnlyHint, destructiveHint, idempotentHint, openWorldHint)`},
		{"tool{name = 'x', handler = function() end, annotations = {readOnlyHint = 'yes'}}",
			`main.lua:1: tool{} "x": annotations: readOnlyHint must be true or false, not a string`},
		{"tool{name = 'x', handler = function() end, annotations = {destructiveHint = 0}}",
			`destructiveHint must be true or false, not a number`},
		{"tool{name = 'x', handler = function() end, annotations = {true}}",
			`annotations: unknown hint 1`},
	}
	for _, c := range cases {
		path := writeFile(t, t.TempDir(), "main.lua", c.code)
		_, err := Open("test", path, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: Open error %v, want it to contain %q", c.code, err, c.want)
		}
	}
}
