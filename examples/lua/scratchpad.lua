-- scratchpad.lua: a notepad the model can write to and read back, one per
-- chat, kept in the source's Lua state between calls and steps.
--
-- It shows state that lives across calls: module-level tables (the notes) and
-- a rate limiter (a token bucket per chat), created once when the script loads
-- and shared by every call. The state is in memory: it is lost when the server
-- restarts, when the script is reloaded, and when a runaway call makes parley
-- rebuild the state.
--
--   tools:
--     lua:
--       - name: scratchpad
--         path: ./examples/lua/scratchpad.lua

local MAX_NOTES = 50         -- per chat
local MAX_NOTE_BYTES = 4000
local RATE = 5               -- writes per second per chat, on average
local BURST = 10             -- writes at once before the rate applies

local notes = {}             -- chat id -> {key -> {text =, at =}}
local buckets = {}           -- chat id -> {tokens =, at =}

-- take returns true if the chat may write now: a token bucket refilled at
-- RATE per second up to BURST.
local function take(chat)
  local t = now()
  local b = buckets[chat] or {tokens = BURST, at = t}
  b.tokens = math.min(BURST, b.tokens + (t - b.at) * RATE)
  b.at = t
  buckets[chat] = b
  if b.tokens < 1 then return false end
  b.tokens = b.tokens - 1
  return true
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

tool{
  name = "remember",
  description = "Save a short note under a key, to recall later in this conversation. Saving under an existing key replaces the note.",
  input_schema = {
    properties = {
      key = {type = "string", description = "a short name for the note", minLength = 1, maxLength = 100},
      text = {type = "string", description = "the note"},
    },
    required = {"key", "text"},
  },
  handler = function(input, call)
    if not take(call.chat) then
      return nil, "too many notes at once: wait a second and try again"
    end
    if #input.text > MAX_NOTE_BYTES then
      return nil, "the note is too long (at most " .. MAX_NOTE_BYTES .. " bytes)"
    end
    local pad = notes[call.chat] or {}
    if pad[input.key] == nil and count(pad) >= MAX_NOTES then
      return nil, "the scratchpad is full (" .. MAX_NOTES .. " notes): replace an existing key"
    end
    pad[input.key] = {text = input.text, at = now()}
    notes[call.chat] = pad
    log.info("note saved", {key = input.key, bytes = #input.text})
    return {saved = input.key, notes = count(pad)}
  end,
}

tool{
  name = "recall",
  description = "Read the notes saved in this conversation: one by key, or the list of keys.",
  input_schema = {
    properties = {
      key = {type = "string", description = "the note to read; leave out to list the keys"},
    },
  },
  handler = function(input, call)
    local pad = notes[call.chat] or {}
    if input.key == nil then
      local keys = {}
      for k in pairs(pad) do keys[#keys + 1] = k end
      table.sort(keys)
      return {keys = json.array(keys)}
    end
    local note = pad[input.key]
    if note == nil then
      return nil, "no note named " .. input.key
    end
    return {key = input.key, text = note.text, saved_seconds_ago = math.floor(now() - note.at)}
  end,
}
