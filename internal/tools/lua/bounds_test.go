package lua

import (
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	glua "github.com/yuin/gopher-lua"
)

const boundsScript = `
local n = 0
tool{name = "count", handler = function() n = n + 1; return n end}
tool{name = "pathological", handler = function()
  return string.find(string.rep("a", 40), string.rep("a*", 30) .. "b")
end}
tool{name = "pathological_pcall", handler = function()
  while true do pcall(string.match, string.rep("a", 40), string.rep("a*", 30) .. "b") end
end}
local function deep(n)
  local ok, err = pcall(deep, n + 1)
  if not ok then error(err, 0) end
  return n
end
local function deepco(n)
  return coroutine.wrap(function() return deepco(n + 1) end)()
end
local function nest(n)
  if n == 0 then return "bottom" end
  local ok, v = pcall(nest, n - 1)
  assert(ok, v)
  return v
end
tool{name = "deep_pcall", handler = function() return deep(1) end}
tool{name = "deep_coroutine", handler = function() return deepco(1) end}
tool{name = "nest", handler = function(input) return nest(input.n) end}
tool{name = "wide_stack", handler = function(input)
  return select("#", string.byte(string.rep("x", input.n), 1, -1))
end}
tool{name = "concat", handler = function(input)
  local t = {}
  for i = 1, input.n do t[i] = "x" end
  return #table.concat(t, ",")
end}
tool{name = "gsub_huge", handler = function()
  return #string.gsub(string.rep("x", 20), "x", string.rep("y", 1000000))
end}
tool{name = "block", handler = function() n = n + 1; block_in_go(); return "unblocked" end}
`

// liveStates is how many of s's states have not exited yet.
func liveStates(s *Source) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// TestPathologicalPatternIsStoppedForReal runs a pattern that backtracks
// for years, with no step budget: the call's time limit must stop the
// matcher itself, so its goroutine ends and no state is left running.
func TestPathologicalPatternIsStoppedForReal(t *testing.T) {
	for _, name := range []string{"pathological", "pathological_pcall"} {
		t.Run(name, func(t *testing.T) {
			s := openSource(t, boundsScript, func(o *Options) { o.CallTimeout = 200 * time.Millisecond })
			s.matchSteps = 1 << 50                // only the time limit stops it
			s.stuckAfter = 300 * time.Millisecond // what used to happen soon fails the test
			okJSON(t, invokeOne(t, s, "count", `{}`))
			goroutines := runtime.NumGoroutine()

			msg := errText(t, invokeOne(t, s, name, `{}`))
			for _, want := range []string{"limit of 200ms", "still running Lua code", "rebuilt"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
			// The stopped state's goroutine ends: one state is left, none
			// abandoned, and the goroutines are back to what they were.
			waitFor(t, func() bool {
				return liveStates(s) == 1 && s.abandonedRunning() == 0 && runtime.NumGoroutine() <= goroutines
			})
			if got := okJSON(t, invokeOne(t, s, "count", `{}`)); got != "1" {
				t.Errorf("count after = %s, want 1 (rebuilt state)", got)
			}
		})
	}
}

// TestPathologicalPatternFailsFast: with the default step budget, the same
// pattern fails at once with an error of its own, long before the time
// limit, and the state is kept.
func TestPathologicalPatternFailsFast(t *testing.T) {
	s := openSource(t, boundsScript, func(o *Options) { o.CallTimeout = 20 * time.Second })
	okJSON(t, invokeOne(t, s, "count", `{}`))
	start := time.Now()
	msg := errText(t, invokeOne(t, s, "pathological", `{}`))
	if !strings.Contains(msg, "string.find: pattern too complex") || strings.Contains(msg, "rebuilt") {
		t.Errorf("error %q, want a pattern too complex error and no rebuild", msg)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("answered after %s", took)
	}
	if got := okJSON(t, invokeOne(t, s, "count", `{}`)); got != "2" {
		t.Errorf("count after = %s, want 2 (the same state)", got)
	}
}

// TestDeepRecursionIsBounded: recursion through pcall or coroutines, each
// level a coroutine of its own, ends at the nesting bound with an error,
// quickly and in little memory, and leaves the bound's count at zero.
func TestDeepRecursionIsBounded(t *testing.T) {
	s := openSource(t, boundsScript, func(o *Options) { o.CallTimeout = 5 * time.Second })
	for _, name := range []string{"deep_pcall", "deep_coroutine"} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		msg := errText(t, invokeOne(t, s, name, `{}`))
		runtime.ReadMemStats(&after)
		if !strings.Contains(msg, "stack overflow: more than 200 nested pcall, xpcall or coroutine calls") {
			t.Errorf("%s: error %q, want the nesting bound's", name, msg)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
			t.Errorf("%s allocated %d MiB", name, alloc>>20)
		}
	}
	// Nesting below the bound still works, after calls that hit it.
	if got := okJSON(t, invokeOne(t, s, "nest", `{"n":190}`)); got != `"bottom"` {
		t.Errorf("nest 190: %s", got)
	}
	if msg := errText(t, invokeOne(t, s, "nest", `{"n":250}`)); !strings.Contains(msg, "nested") {
		t.Errorf("nest 250: %q", msg)
	}
	if s.current().nested != 0 {
		t.Errorf("nesting count %d after the calls", s.current().nested)
	}
}

// TestStackSizeIsBounded: one coroutine's stack holds at most 64Ki values;
// table.concat, which gopher-lua ran on the stack, does not need it.
func TestStackSizeIsBounded(t *testing.T) {
	s := openSource(t, boundsScript)
	if got := okJSON(t, invokeOne(t, s, "wide_stack", `{"n":30000}`)); got != "30000" {
		t.Errorf("30000 values: %s", got)
	}
	if msg := errText(t, invokeOne(t, s, "wide_stack", `{"n":70000}`)); !strings.Contains(msg, "registry overflow") {
		t.Errorf("70000 values: %q", msg)
	}
	if got := okJSON(t, invokeOne(t, s, "concat", `{"n":70000}`)); got != "139999" {
		t.Errorf("table.concat of 70000: %s", got)
	}
	if msg := errText(t, invokeOne(t, s, "gsub_huge", `{}`)); !strings.Contains(msg, "string.gsub: the result would be larger than 16777216 bytes") {
		t.Errorf("a huge gsub: %q", msg)
	}
}

// TestAbandonedStatesAreBounded blocks calls in Go code that ignores their
// context: the first maxAbandoned stuck states are abandoned and rebuilt;
// after that a stuck state is kept, and calls fail at once instead of
// leaving one more goroutine behind. Once the Go code returns, every
// abandoned goroutine ends and the source serves again.
func TestAbandonedStatesAreBounded(t *testing.T) {
	release := make(chan struct{})
	releaseAll := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseAll)
	var entered atomic.Int32
	m := NewMetrics()
	s := openSource(t, boundsScript, func(o *Options) {
		o.CallTimeout = 100 * time.Millisecond
		o.Metrics = m
		o.hooks = map[string]glua.LGFunction{"block_in_go": func(*glua.LState) int {
			entered.Add(1)
			select {
			case <-release:
			case <-time.After(deadline):
			}
			return 0
		}}
	})
	s.stuckAfter = 200 * time.Millisecond
	gauge := m.abandoned.WithLabelValues("test")

	for i := 1; i <= maxAbandoned; i++ {
		if msg := errText(t, invokeOne(t, s, "block", `{}`)); !strings.Contains(msg, "stuck and has been rebuilt") {
			t.Fatalf("stuck call %d: %q", i, msg)
		}
		if got := s.abandonedRunning(); got != i {
			t.Fatalf("after stuck call %d: %d abandoned states", i, got)
		}
	}
	if got := gaugeValue(t, gauge); got != maxAbandoned {
		t.Errorf("abandoned gauge = %v, want %d", got, maxAbandoned)
	}
	bound := "stuck in code that cannot be interrupted, and 2 states stuck before it still run"
	if msg := errText(t, invokeOne(t, s, "block", `{}`)); !strings.Contains(msg, bound) {
		t.Fatalf("a stuck call past the bound: %q", msg)
	}
	if msg := errText(t, invokeOne(t, s, "count", `{}`)); !strings.Contains(msg, bound) {
		t.Errorf("a call while the bound holds: %q", msg)
	}
	if got := s.abandonedRunning(); got != maxAbandoned {
		t.Errorf("%d abandoned states, want %d", got, maxAbandoned)
	}
	if got := entered.Load(); got != maxAbandoned+1 {
		t.Errorf("block_in_go entered %d times, want %d", got, maxAbandoned+1)
	}

	releaseAll()
	waitFor(t, func() bool { return s.abandonedRunning() == 0 && liveStates(s) == 1 })
	if got := gaugeValue(t, gauge); got != 0 {
		t.Errorf("abandoned gauge = %v after the release, want 0", got)
	}
	if got := okJSON(t, invokeOne(t, s, "count", `{}`)); got != "1" {
		t.Errorf("after the release: count = %s, want 1 (a rebuilt state)", got)
	}
}

// TestPatternFunctionsFollowLua51 checks string.find, match, gsub and gmatch
// against what Lua 5.1 answers.
func TestPatternFunctionsFollowLua51(t *testing.T) {
	cases := []struct{ code, want string }{
		{`string.find("hello world", "o w")`, "5 7"},
		{`string.find("hello world", "l+", 5)`, "10 10"},
		{`string.find("a.b", ".", 1, true)`, "2 2"},
		{`string.find("a+b", "+", 1)`, "2 2"},
		{`string.find("abc", "")`, "1 0"},
		{`string.find("abc", "", 10)`, "4 3"},
		{`string.find("abc", "b", -1)`, "nil"},
		{`string.find("hello", "(l)(l)")`, "3 4 l l"},
		{`string.match("key = value", "(%w+)%s*=%s*(%w+)")`, "key value"},
		{`string.match("hello", "xyz")`, "nil"},
		{`string.match("  trim  ", "^%s*(.-)%s*$")`, "trim"},
		{`string.match("hello", "()ll()")`, "3 5"},
		{`string.match("THE (quick) fox", "%f[%a]%a+", 2)`, "quick"},
		{`string.match("f(a(b)c)d", "%b()")`, "(a(b)c)"},
		{`string.match("abcabc", "(abc)%1")`, "abc"},
		{`string.match("2024-05-01", "^(%d+)-(%d+)-(%d+)$")`, "2024 05 01"},
		{`string.match("a]b", "[]a]+")`, "a]"},
		{`string.match("x-y", "[%w-]+")`, "x-y"},
		{`string.gsub("hello world", "(%w+)", "<%1>")`, "<hello> <world> 2"},
		{`string.gsub("abc", "", "-")`, "-a-b-c- 4"},
		{`string.gsub("hello world", "o", "0", 1)`, "hell0 world 1"},
		{`string.gsub("abc", "%w", "%%%0")`, "%a%b%c 3"},
		{`string.gsub("a.b", "%.", "%x")`, "axb 1"},
		{`string.gsub("$name is $age", "%$(%w+)", {name = "Ann", age = 7})`, "Ann is 7 2"},
		{`string.gsub("abc", "%w", function(c) if c == "b" then return false end return c:upper() end)`, "AbC 3"},
		{`string.gsub("THE END", "%f[%w]%w+", "W")`, "W W 2"},
		{`string.gsub("abc", "^.", "X")`, "Xbc 1"},
		{`(function() local t = {} for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do t[#t+1] = k .. v end return table.concat(t, ",") end)()`, "a1,b2"},
		{`(function() local n = 0 for w in ("abc"):gmatch("x*") do n = n + 1 end return n end)()`, "4"},
		{`("x-y"):find("-", 1, true)`, "2 2"},
		{`string.find("abc", "%")`, "error: malformed pattern (ends with '%')"},
		{`string.find("abc", "[a")`, "error: malformed pattern (missing ']')"},
		{`string.find("abc", "(")`, "error: unfinished capture"},
		{`string.find("abc", "%1")`, "error: invalid capture index"},
		{`string.gsub("abc", "b", true)`, "error: bad argument #3 to gsub (string/function/table expected)"},
	}
	var code strings.Builder
	code.WriteString(`local function show(ok, ...)
  if not ok then return "error: " .. tostring((...)):gsub("^main.lua:%d+: ", "") end
  local t = {}
  for i = 1, select("#", ...) do t[i] = tostring((select(i, ...))) end
  return table.concat(t, " ")
end
tool{name = "patterns", handler = function() return {` + "\n")
	for _, c := range cases {
		code.WriteString("  show(pcall(function() return " + c.code + " end)),\n")
	}
	code.WriteString("} end}\n")
	s := openSource(t, code.String())
	var got []string
	if err := json.Unmarshal([]byte(okJSON(t, invokeOne(t, s, "patterns", `{}`))), &got); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if i >= len(got) || got[i] != c.want {
			var g string
			if i < len(got) {
				g = got[i]
			}
			t.Errorf("%s = %q, want %q", c.code, g, c.want)
		}
	}
}

// gaugeValue reads a gauge.
func gaugeValue(t testing.TB, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
