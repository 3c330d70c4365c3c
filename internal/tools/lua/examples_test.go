package lua

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/tool"
)

// examplesDir holds the example scripts of docs/lua-tools.md.
var examplesDir = filepath.Join("..", "..", "..", "examples", "lua")

func TestExampleScratchpad(t *testing.T) {
	s := openPath(t, filepath.Join(examplesDir, "scratchpad.lua"))
	inChat := func(chat, id, name, args string) tool.Call {
		c := newCall(id, name, args)
		c.ChatID = chat
		return c
	}
	res := invoke(t, s, inChat("a", "1", "remember", `{"key":"plan","text":"buy milk"}`))
	if got := okJSON(t, res[0]); got != `{"notes":1,"saved":"plan"}` {
		t.Fatalf("remember: %s", got)
	}
	// A later batch of the same chat reads it; another chat does not.
	res = invoke(t, s, inChat("a", "2", "recall", `{"key":"plan"}`), inChat("b", "3", "recall", `{}`), inChat("b", "4", "recall", `{"key":"plan"}`))
	if got := okJSON(t, res[0]); !strings.Contains(got, `"text":"buy milk"`) {
		t.Errorf("recall in chat a: %s", got)
	}
	if got := okJSON(t, res[1]); got != `{"keys":[]}` {
		t.Errorf("keys in chat b: %s", got)
	}
	if msg := errText(t, res[2]); msg != "no note named plan" {
		t.Errorf("recall in chat b: %s", msg)
	}
	// The rate limiter keeps its tokens across calls: a burst of 10, then no.
	var calls []tool.Call
	for i := range 12 {
		calls = append(calls, inChat("c", fmt.Sprint("w", i), "remember", fmt.Sprintf(`{"key":"k%d","text":"x"}`, i)))
	}
	res = invoke(t, s, calls...)
	for i, r := range res {
		if i < 10 && r.IsError || i >= 10 && !r.IsError {
			t.Errorf("write %d of a burst: %s (error %v)", i, r.Output, r.IsError)
		}
	}
}

func TestExampleWeather(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/search":
			if r.URL.Query().Get("name") == "Nowhere" {
				fmt.Fprint(w, `{}`)
				return
			}
			fmt.Fprintf(w, `{"results":[{"name":%q,"country":"France","latitude":48.85,"longitude":2.35}]}`, r.URL.Query().Get("name"))
		case "/forecast":
			if r.URL.Query().Get("latitude") != "48.85" || r.URL.Query().Get("current_weather") != "true" {
				http.Error(w, "bad query "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			fmt.Fprint(w, `{"current_weather":{"temperature":21.5,"windspeed":9,"time":"2025-06-01T12:00"}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	code, err := os.ReadFile(filepath.Join(examplesDir, "weather.lua"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "00_config.lua", fmt.Sprintf("WEATHER_GEOCODING_URL = %q\nWEATHER_FORECAST_URL = %q\n", srv.URL+"/search", srv.URL+"/forecast"))
	writeFile(t, dir, "weather.lua", string(code))
	s := openPath(t, dir, func(o *Options) { o.AllowHosts = []string{"127.0.0.1"} })

	want := `{"city":"Paris","country":"France","observed":"2025-06-01T12:00","temperature_c":21.5,"wind_kmh":9}`
	if got := okJSON(t, invokeOne(t, s, "current_weather", `{"city":"Paris"}`)); got != want {
		t.Fatalf("weather: %s\nwant %s", got, want)
	}
	if got := okJSON(t, invokeOne(t, s, "current_weather", `{"city":"paris"}`)); got != want || hits.Load() != 2 {
		t.Errorf("cached weather: %s after %d requests, want 2", got, hits.Load())
	}
	if msg := errText(t, invokeOne(t, s, "current_weather", `{"city":"Nowhere"}`)); msg != "no city named Nowhere" {
		t.Errorf("unknown city: %q", msg)
	}
}
