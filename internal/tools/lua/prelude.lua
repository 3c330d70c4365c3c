-- The prelude runs in every Lua state before the scripts. It makes pcall,
-- xpcall and coroutines transparent to the host's waits, and returns the
-- function every call's coroutine starts in.
--
-- A host function that waits (sleep, http.request) yields the marker HOST up
-- to the source's event loop, which resumes the call's coroutine when the
-- result is ready. gopher-lua's pcall and xpcall are Go functions, and a yield
-- cannot cross them, so here they run their function in a coroutine of their
-- own and pass every yield up. A script's own coroutines pass HOST up and keep
-- every other yield for themselves.
--
-- gopher-lua also loses a yield made by a Go function at the bottom of a
-- coroutine, or tail-called from there ("return sleep(1)" in a handler), so
-- every coroutine starts in a Lua function that calls the real one in a
-- non-tail position: id(f(...)). An error raised at that level (by a Go
-- function called by pcall directly, or by error(msg, 2)) would name a line
-- of this file; unplace removes that position, as standard Lua gives none.
local HOST = ...
local create, resume, yield, status = coroutine.create, coroutine.resume, coroutine.yield, coroutine.status
local error, type, select, native_pcall, gsub = error, type, select, pcall, string.gsub

local function id(...) return ... end

-- passAll forwards every yield of co to whoever resumed the running coroutine.
local function passAll(co, ok, ...)
  if ok and status(co) == "suspended" then
    return passAll(co, resume(co, yield(...)))
  end
  return ok, ...
end

-- passHost forwards the host's waits of co and returns everything else.
local function passHost(co, ok, ...)
  if ok and (...) == HOST and status(co) == "suspended" then
    return passHost(co, resume(co, yield(...)))
  end
  return ok, ...
end

local function start(f)
  return create(function(...) return id(f(...)) end)
end

local function unplace(ok, ...)
  if ok or type((...)) ~= "string" then return ok, ... end
  return false, (gsub((...), "^=prelude:%d+: ", "")), select(2, ...)
end

function pcall(f, ...)
  if type(f) ~= "function" then return native_pcall(f, ...) end
  local co = start(f)
  return unplace(passAll(co, resume(co, ...)))
end

function xpcall(f, handler)
  if type(f) ~= "function" then return native_pcall(f) end
  local co = start(f)
  local function finish(ok, ...)
    if ok then return true, ... end
    return false, handler((...))
  end
  return finish(unplace(passAll(co, resume(co))))
end

local function unwrap(ok, ...)
  if ok then return ... end
  error((...), 0)
end

local function newco(f)
  if type(f) ~= "function" then
    error("bad argument #1 to create (function expected, got " .. type(f) .. ")", 3)
  end
  return start(f)
end

function coroutine.create(f) return (newco(f)) end

function coroutine.resume(co, ...)
  return passHost(co, resume(co, ...))
end

function coroutine.wrap(f)
  local co = newco(f)
  return function(...) return unwrap(unplace(passHost(co, resume(co, ...)))) end
end

return function(handler, input, call) return id(handler(input, call)) end
