package lua

import "testing"

// TestWaitsThroughPcallAndCoroutines checks host waits inside pcall, xpcall
// and a script's own coroutines: they wait (rather than break the call), and
// each keeps its usual meaning.
func TestWaitsThroughPcallAndCoroutines(t *testing.T) {
	s := openSource(t, `
local function pack(...) return json.array({n = select("#", ...), ...}) end
tool{name = "cases", handler = function()
  local out = {}
  out.pcall_sleep = pack(pcall(sleep, 0.01))
  out.pcall_tail = pack(pcall(function() return sleep(0.01) end))
  out.pcall_value = pack(pcall(function() sleep(0.01); return 5, 6 end))
  out.pcall_error = pack(pcall(function() sleep(0.01); error("late") end))
  out.pcall_go_error = pack(pcall(json.decode, "{"))
  out.pcall_level2 = pack(pcall(function() error("who", 2) end))
  out.nested = pack(pcall(pcall, function() sleep(0.01); error("inner") end))
  out.xpcall = pack(xpcall(function() sleep(0.01); error("x") end, function(e) return "handled: " .. e end))
  local co = coroutine.wrap(function(a)
    local b = coroutine.yield(a + 1)
    sleep(0.01)
    local c = coroutine.yield(b * 2)
    return c .. "!"
  end)
  out.wrap = pack(co(1), co(10), co("done"))
  local c2 = coroutine.create(function() sleep(0.01); return "finished" end)
  out.resume = pack(coroutine.resume(c2))
  out.status = coroutine.status(c2)
  out.wrap_error = pack(pcall(coroutine.wrap(function() sleep(0); error("in wrap") end)))
  return out
end}`)
	got := okJSON(t, invokeOne(t, s, "cases", `{}`))
	want := `{` +
		`"nested":[true,false,"main.lua:11: inner"],` +
		`"pcall_error":[false,"main.lua:8: late"],` +
		`"pcall_go_error":[false,"json.decode: unexpected end of JSON input"],` +
		`"pcall_level2":[false,"main.lua:10: who"],` +
		`"pcall_sleep":[true],` +
		`"pcall_tail":[true],` +
		`"pcall_value":[true,5,6],` +
		`"resume":[true,"finished"],` +
		`"status":"dead",` +
		`"wrap":[2,20,"done!"],` +
		`"wrap_error":[false,"main.lua:23: in wrap"],` +
		`"xpcall":[false,"handled: main.lua:12: x"]}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
