package lua

import (
	"strconv"
	"strings"
	"testing"

	glua "github.com/yuin/gopher-lua"
)

func TestReturnValuesConvertToJSON(t *testing.T) {
	cases := []struct{ code, want string }{
		{`return nil`, `null`},
		{``, `null`},
		{`return true`, `true`},
		{`return 3`, `3`},
		{`return -0.5`, `-0.5`},
		{`return 2^53`, `9007199254740992`},
		{`return 1e300`, `1e+300`},
		{`return "héllo \"q\" \n"`, `"héllo \"q\" \n"`},
		{`return {}`, `{}`},
		{`return json.array()`, `[]`},
		{`return json.array({})`, `[]`},
		{`return json.object({1, 2})`, `{"1":1,"2":2}`},
		{`return {1, "two", false}`, `[1,"two",false]`},
		{`return {1, nil, 3}`, `{"1":1,"3":3}`},
		{`return json.array({1, nil, 3})`, `[1,null,3]`},
		{`return {json.null, 2}`, `[null,2]`},
		{`return {a = json.null}`, `{"a":null}`},
		{`return {[1] = "a", [2] = "b", x = 1}`, `{"1":"a","2":"b","x":1}`},
		{`return {[2] = "b"}`, `{"2":"b"}`},
		{`return {[1.5] = "x"}`, `{"1.5":"x"}`},
		{`return {a = {b = {c = {}}}}`, `{"a":{"b":{"c":{}}}}`},
		{`local shared = {1}; return {x = shared, y = shared}`, `{"x":[1],"y":[1]}`},
		{`return "a", "ignored"`, `"a"`},
		{`return json.decode('{"a":[1,{"b":null}],"c":[]}')`, `{"a":[1,{}],"c":[]}`},
		{`return json.encode({b = 1, a = {true}})`, `"{\"a\":[true],\"b\":1}"`},
	}
	errCases := []struct{ code, want string }{
		{`local t = {}; t.self = t; return t`, "the table contains itself (a cycle) (at $.self)"},
		{`local t = {1}; t[2] = {t}; return t`, "a cycle) (at $[2][1])"},
		{`return {f = function() end}`, "cannot convert a function to JSON (at $.f)"},
		{`return {list = {1, print}}`, "cannot convert a function to JSON (at $.list[2])"},
		{`return coroutine.create(function() end)`, "cannot convert a thread to JSON"},
		{`return http`, "cannot convert a userdata to JSON"},
		{`return {["odd key"] = 0/0}`, `cannot convert the number NaN to JSON (at $["odd key"])`},
		{`return 1/0`, "cannot convert the number +Inf to JSON"},
		{`return {[true] = 1}`, "a table key is a boolean"},
		{`local t = {}; local cur = t; for i = 1, 300 do cur.n = {}; cur = cur.n end; return t`, "nested deeper than 200 levels"},
		{`return json.encode(print)`, "json.encode: cannot convert a function to JSON"},
		{`return json.decode("{nope")`, "json.decode: invalid character"},
		{`return nil, {reason = "quota"}`, `{"reason":"quota"}`},
	}
	var script strings.Builder
	for i, c := range cases {
		script.WriteString("tool{name = \"ok" + strconv.Itoa(i) + "\", handler = function(input)\n" + c.code + "\nend}\n")
	}
	for i, c := range errCases {
		script.WriteString("tool{name = \"err" + strconv.Itoa(i) + "\", handler = function(input)\n" + c.code + "\nend}\n")
	}
	s := openSource(t, script.String())
	for i, c := range cases {
		if got := okJSON(t, invokeOne(t, s, "ok"+strconv.Itoa(i), `{}`)); got != c.want {
			t.Errorf("%s: %s, want %s", c.code, got, c.want)
		}
	}
	for i, c := range errCases {
		res := invokeOne(t, s, "err"+strconv.Itoa(i), `{}`)
		if !res.IsError || !strings.Contains(string(res.Output), strings.ReplaceAll(c.want, `"`, `\"`)) && !strings.Contains(string(res.Output), c.want) {
			t.Errorf("%s: %s (error %v), want an error containing %s", c.code, res.Output, res.IsError, c.want)
		}
	}
}

func TestArgumentsConvertToLua(t *testing.T) {
	s := openSource(t, `
tool{name = "echo", handler = function(input) return input end}
tool{name = "inspect", handler = function(input)
  return {
    missing_is_nil = input.c == nil,
    null_in_array = input.d[2] == json.null,
    len = #input.d,
    number = input.e + 1,
    empty_array_len = #input.a,
    nested = input.f.g.h,
  }
end}`)
	args := `{"a":[],"b":{},"c":null,"d":[1,null,3],"e":1e3,"f":{"g":{"h":"deep"}},"u":"ü\u0000x"}`
	if got, want := okJSON(t, invokeOne(t, s, "echo", args)), `{"a":[],"b":{},"d":[1,null,3],"e":1000,"f":{"g":{"h":"deep"}},"u":"ü\u0000x"}`; got != want {
		t.Errorf("echo: %s, want %s", got, want)
	}
	want := `{"empty_array_len":0,"len":3,"missing_is_nil":true,"nested":"deep","null_in_array":true,"number":1001}`
	if got := okJSON(t, invokeOne(t, s, "inspect", args)); got != want {
		t.Errorf("inspect: %s, want %s", got, want)
	}
	if got := okJSON(t, invokeOne(t, s, "echo", ``)); got != `{}` {
		t.Errorf("no arguments: %s", got)
	}
}

func TestInputSchemaConversion(t *testing.T) {
	cases := []struct{ lua, want string }{
		{`nil`, `{"type":"object","properties":{}}`},
		{`{}`, `{"type":"object"}`},
		{`{properties = {}}`, `{"properties":{},"type":"object"}`},
		{`{properties = {required = {type = "boolean"}}, required = {}}`, `{"properties":{"required":{"type":"boolean"}},"required":[],"type":"object"}`},
		{`{properties = {tags = {type = "array", items = {type = "string", enum = {}}}}}`, `{"properties":{"tags":{"items":{"enum":[],"type":"string"},"type":"array"}},"type":"object"}`},
		{`{anyOf = {{required = {}}, {properties = {}}}}`, `{"anyOf":[{"required":[]},{"properties":{}}],"type":"object"}`},
		{`{type = "object", additionalProperties = false}`, `{"additionalProperties":false,"type":"object"}`},
	}
	L := newTestState(t)
	k := newJSONKinds(L)
	for _, c := range cases {
		if err := L.DoString("schema = " + c.lua); err != nil {
			t.Fatal(err)
		}
		raw, err := k.inputSchema(L.GetGlobal("schema"))
		if err != nil {
			t.Errorf("%s: %v", c.lua, err)
			continue
		}
		if string(raw) != c.want {
			t.Errorf("%s: %s, want %s", c.lua, raw, c.want)
		}
	}
}

func newTestState(t testing.TB) *glua.LState {
	L := glua.NewState()
	t.Cleanup(L.Close)
	return L
}
