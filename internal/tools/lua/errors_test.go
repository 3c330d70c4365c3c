package lua

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestHandlerErrorsCarryFileAndLine(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.lua", `-- line 1
tool{name = "boom", handler = function(input)
  local x = 1
  error("boom " .. x)
end}
tool{name = "index_nil", handler = function()
  local t = nil
  return t.field
end}
`)
	writeFile(t, dir, "b.lua", `
local function helper(v)
  if v < 0 then
    error("negative: " .. v)
  end
  return v
end
tool{name = "nested", handler = function(input) return helper(input.v) end}
tool{name = "soft", handler = function() return nil, "no such city" end}
tool{name = "table_error", handler = function() error({code = 7}) end}
tool{name = "bad_arg", handler = function() return string.rep() end}
tool{name = "no_wait_in_sort", handler = function()
  local t = {3, 1, 2}
  table.sort(t, function(a, b) sleep(0); return a < b end)
end}
tool{name = "no_wait_in_metamethod", handler = function()
  return setmetatable({}, {__index = function() sleep(0); return 1 end}).x
end}
`)
	s := openPath(t, dir)
	cases := []struct{ name, args, want string }{
		{"boom", `{}`, "a.lua:4: boom 1"},
		{"index_nil", `{}`, "a.lua:8: attempt to index a non-table object(nil) with key 'field'"},
		{"nested", `{"v":-2}`, "b.lua:4: negative: -2"},
		{"soft", `{}`, "no such city"},
		{"table_error", `{}`, `error: {"code":7}`},
		{"bad_arg", `{}`, "b.lua:11: bad argument #1 to rep"},
		{"no_wait_in_sort", `{}`, "b.lua:14: sleep cannot wait inside a function called by Go code"},
		{"no_wait_in_metamethod", `{}`, "a host function that waits (sleep, http) was called where Lua cannot wait"},
	}
	for _, c := range cases {
		msg := errText(t, invokeOne(t, s, c.name, c.args))
		if !strings.HasPrefix(msg, c.want) {
			t.Errorf("%s: error %q, want it to start with %q", c.name, msg, c.want)
		}
	}
	if got := okJSON(t, invokeOne(t, s, "nested", `{"v":3}`)); got != "3" {
		t.Errorf("nested ok: %s", got)
	}
}

func TestLoadErrorsNameTheScript(t *testing.T) {
	cases := []struct{ code, want string }{
		{"tool{name = 'x', handler = function() end\n\nlocal = 1", "main.lua line:3(column:5) near 'local': syntax error"},
		{"\n\nerror('no config')", "load main.lua: main.lua:3: no config"},
		{"tool{name = 'bad name!', handler = function() end}", `name "bad name!" must match`},
		{"tool{name = 'x'}", `"x": handler (a function) is required`},
		{"tool{name = 'x', handler = print, schema = {}}", "unknown field schema"},
		{"tool{name = 'x', handler = function() end}\ntool{name = 'x', handler = function() end}", `main.lua:2: tool{}: "x" is declared twice`},
		{"tool{name = 'x', handler = function() end, input_schema = {properties = {f = print}}}", "cannot convert a function to JSON (at $.properties.f)"},
		{"tool{name = 'x', handler = function() end, input_schema = {'a', 'b'}}", "input_schema must be a table of keywords"},
		{"local x = 1", "the scripts declare no tool"},
		{"sleep(1)", "sleep cannot wait while the scripts load"},
	}
	for _, c := range cases {
		path := writeFile(t, t.TempDir(), "main.lua", c.code)
		_, err := Open("test", path, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: Open error %v, want it to contain %q", c.code, err, c.want)
		}
	}
	if _, err := Open("test", filepath.Join(t.TempDir(), "missing.lua"), Options{}); err == nil {
		t.Error("Open of a missing file: no error")
	}
	if _, err := Open("test", t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "no .lua files") {
		t.Errorf("Open of an empty folder: %v", err)
	}
}

func TestFolderScriptsLoadInOrderAndShareGlobals(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "20_tools.lua", `tool{name = "greet", handler = function(input) return greeting .. ", " .. input.name end}`)
	writeFile(t, dir, "10_config.lua", `greeting = "hello"`)
	writeFile(t, dir, "notes.txt", `not lua`)
	s := openPath(t, dir)
	if got := okJSON(t, invokeOne(t, s, "greet", `{"name":"ada"}`)); got != `"hello, ada"` {
		t.Errorf("greet: %s", got)
	}
}
