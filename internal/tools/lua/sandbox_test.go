package lua

import (
	"strconv"
	"strings"
	"testing"
)

// TestSandboxRefusesEscapes runs each escape attempt as a handler: every one
// must end in an error result, and the host modules must still work after.
func TestSandboxRefusesEscapes(t *testing.T) {
	cases := []struct {
		name, code, wantErr string
	}{
		{"os.execute", `return os.execute("touch /tmp/parley-escaped")`, "attempt to index"},
		{"os.getenv", `return os.getenv("HOME")`, "attempt to index"},
		{"io.open", `return io.open("/etc/passwd"):read("*a")`, "attempt to index"},
		{"io.popen", `return io.popen("id")`, "attempt to index"},
		{"require a file", `return require("main")`, "attempt to call a non-function"},
		{"package.loadlib", `return package.loadlib("x", "y")`, "attempt to index"},
		{"dofile", `return dofile("/etc/passwd")`, "attempt to call a non-function"},
		{"loadfile", `return loadfile("main.lua")`, "attempt to call a non-function"},
		{"load bytecode", `return load("\27LuaQ\0\1\4\8\4\8\0")`, "attempt to call a non-function"},
		{"loadstring", `return loadstring("return 1")()`, "attempt to call a non-function"},
		{"string.dump", `return string.dump(function() end)`, "attempt to call a non-function"},
		{"string.dump via metatable", `return (""):dump()`, "attempt to call a non-function"},
		{"debug.getregistry", `return debug.getregistry()`, "attempt to index"},
		{"debug.setmetatable", `return debug.setmetatable(json, nil)`, "attempt to index"},
		{"getfenv", `return getfenv(1)`, "attempt to call a non-function"},
		{"setfenv", `return setfenv(1, {})`, "attempt to call a non-function"},
		{"setmetatable on a host module", `return setmetatable(json, {})`, "cannot change a protected metatable"},
		{"setmetatable(nil) on a host module", `return setmetatable(http, nil)`, "cannot change a protected metatable"},
		{"rawset on a host module", `return rawset(http, "request", print)`, "table expected"},
		{"rawget on a host module", `return rawget(http, "request")`, "table expected"},
		{"assign into a host module", `http.request = function() return "hijacked" end`, "http is read-only"},
		{"assign into json", `json.encode = nil`, "json is read-only"},
		{"assign into log", `log.info = print`, "log is read-only"},
		{"assign into json.null", `json.null.x = 1`, "null is read-only"},
		{"setmetatable on json.null", `return setmetatable(json.null, {})`, "cannot change a protected metatable"},
		{"string.rep of a huge string", `return string.rep("x", 1e12)`, "larger than 16777216 bytes"},
		{"tool{} from a handler", `tool{name = "late", handler = function() end}`, "only be called while the scripts load"},
	}
	var script strings.Builder
	for i, c := range cases {
		script.WriteString("tool{name = \"t" + strconv.Itoa(i) + "\", handler = function(input)\n" + c.code + "\nend}\n")
	}
	script.WriteString(`tool{name = "check", handler = function()
  return {
    os = os == nil, io = io == nil, debug = debug == nil, package = package == nil,
    getmeta = getmetatable(json), encode = json.encode({1}), request = type(http.request),
    escaped = (getmetatable(json).__index or {}).encode ~= nil,
  }
end}`)
	s := openSource(t, script.String())
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := invokeOne(t, s, "t"+strconv.Itoa(i), `{}`)
			if msg := errText(t, res); !strings.Contains(msg, c.wantErr) {
				t.Errorf("error %q, want it to contain %q", msg, c.wantErr)
			}
		})
	}
	want := `{"debug":true,"encode":"[1]","escaped":false,"getmeta":"locked","io":true,"os":true,"package":true,"request":"function"}`
	if got := okJSON(t, invokeOne(t, s, "check", `{}`)); got != want {
		t.Errorf("after the attempts: %s, want %s", got, want)
	}
}

// TestPrintGoesToTheLog checks print and log.* write to the server's log
// with the source's name and the call, never to standard output.
func TestPrintGoesToTheLog(t *testing.T) {
	var logs logBuffer
	s := openSource(t, `
tool{name = "talk", handler = function()
  print("hello", 42)
  log.warn("careful", {n = 1, what = "x", list = {1, 2}})
  return true
end}`, func(o *Options) { o.Logger = logs.logger() })
	okJSON(t, invokeOne(t, s, "talk", `{}`))
	out := logs.String()
	for _, want := range []string{
		`level=INFO msg="hello\t42" source=test tool=talk call=c1 chat=chat-1`,
		`level=WARN msg=careful source=test tool=talk call=c1 chat=chat-1 list="[1 2]" n=1 what=x`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
