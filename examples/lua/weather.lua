-- weather.lua: the current weather of a city, from the Open-Meteo API
-- (https://open-meteo.com, free, no key).
--
-- It shows http.request from a tool: the two requests of a call (find the
-- city, then its weather) wait in Go while the source's other calls go on,
-- so a step that asks for ten cities takes about as long as one. Answers are
-- cached for ten minutes in the source's state.
--
-- The server must allow the hosts:
--
--   tools:
--     lua:
--       - name: weather
--         path: ./examples/lua/weather.lua
--     lua_runtime:
--       http_allow_hosts: [geocoding-api.open-meteo.com, api.open-meteo.com]

-- Set these globals in a script loaded before this one to use other servers.
local GEOCODING = WEATHER_GEOCODING_URL or "https://geocoding-api.open-meteo.com/v1/search"
local FORECAST = WEATHER_FORECAST_URL or "https://api.open-meteo.com/v1/forecast"
local CACHE_SECONDS = 600

local cache = {}  -- lower-case city -> {at =, answer =}

-- query encodes a table as URL query parameters.
local function query(params)
  local parts = {}
  for k, v in pairs(params) do
    local s = tostring(v):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", string.byte(c)) end)
    parts[#parts + 1] = k .. "=" .. s
  end
  table.sort(parts)
  return table.concat(parts, "&")
end

-- getJSON fetches a URL and decodes its JSON body, or returns nil and a message.
local function getJSON(url)
  local resp, err = http.request{url = url, headers = {Accept = "application/json"}, timeout = 5}
  if not resp then return nil, err end
  if resp.status ~= 200 then
    return nil, "HTTP " .. resp.status .. " from " .. url
  end
  local ok, body = pcall(json.decode, resp.body)
  if not ok then return nil, "not JSON: " .. body end
  return body
end

tool{
  name = "current_weather",
  description = "The current temperature (°C) and wind speed (km/h) in a city.",
  input_schema = {
    properties = {city = {type = "string", description = "a city name, like Paris or São Paulo", minLength = 1}},
    required = {"city"},
  },
  handler = function(input)
    local key = string.lower(input.city)
    local hit = cache[key]
    if hit and now() - hit.at < CACHE_SECONDS then
      return hit.answer
    end

    local places, err = getJSON(GEOCODING .. "?" .. query{name = input.city, count = 1})
    if not places then return nil, err end
    local place = places.results and places.results[1]
    if not place then return nil, "no city named " .. input.city end

    local forecast, ferr = getJSON(FORECAST .. "?" .. query{
      latitude = place.latitude, longitude = place.longitude, current_weather = "true",
    })
    if not forecast then return nil, ferr end
    local cw = forecast.current_weather or {}

    local answer = {
      city = place.name,
      country = place.country,
      temperature_c = cw.temperature,
      wind_kmh = cw.windspeed,
      observed = cw.time,
    }
    cache[key] = {at = now(), answer = answer}
    log.info("weather fetched", {city = place.name})
    return answer
  end,
}
