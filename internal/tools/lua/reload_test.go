package lua

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/tool"
)

func toolNames(t testing.TB, s *Source) string {
	t.Helper()
	decls, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range decls {
		names = append(names, d.Name)
	}
	return strings.Join(names, ",")
}

const versionOne = `
local calls = 0
tool{name = "version", handler = function(input)
  calls = calls + 1
  log.info("started")
  sleep(input.s or 0)
  return "one/" .. calls
end}`

const versionTwo = `
tool{name = "version", handler = function() return "two" end}
tool{name = "added", handler = function() return true end}`

// TestReloadKeepsBatchesInFlight reloads while a call waits: the call
// finishes on the old scripts, new calls run the new ones, and the list of
// tools follows.
func TestReloadKeepsBatchesInFlight(t *testing.T) {
	var logs logBuffer
	m := NewMetrics()
	dir := t.TempDir()
	writeFile(t, dir, "tools.lua", versionOne)
	s := openPath(t, dir, func(o *Options) { o.Logger = logs.logger(); o.Metrics = m })
	if got := okJSON(t, invokeOne(t, s, "version", `{}`)); got != `"one/1"` {
		t.Fatalf("before: %s", got)
	}

	inFlight := make(chan tool.Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		res, err := s.InvokeBatch(ctx, []tool.Call{newCall("slow", "version", `{"s":0.2}`)})
		if err != nil {
			t.Error(err)
		}
		inFlight <- res[0]
	}()
	waitFor(t, func() bool { return strings.Count(logs.String(), "started") == 2 })

	writeFile(t, dir, "tools.lua", versionTwo)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(t, s); got != "version,added" {
		t.Errorf("tools after reload: %s", got)
	}
	if got := okJSON(t, invokeOne(t, s, "version", `{}`)); got != `"two"` {
		t.Errorf("a new call: %s", got)
	}
	if got := okJSON(t, <-inFlight); got != `"one/2"` {
		t.Errorf("the call in flight during the reload: %s", got)
	}
	if got := counterValue(t, m.reloads.WithLabelValues("test", "ok")); got != 1 {
		t.Errorf("reloads{ok} = %v", got)
	}

	// Unchanged scripts are not reloaded; broken ones are refused and the
	// previous ones stay.
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "tools.lua", "tool{name = 'broken', handler = function() end")
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "tools.lua at EOF: syntax error") {
		t.Errorf("broken reload: %v", err)
	}
	if got := toolNames(t, s); got != "version,added" {
		t.Errorf("tools after a refused reload: %s", got)
	}
	if got := counterValue(t, m.reloads.WithLabelValues("test", "ok")); got != 1 {
		t.Errorf("reloads{ok} = %v after an unchanged and a broken reload", got)
	}
	if got := counterValue(t, m.reloads.WithLabelValues("test", "error")); got != 1 {
		t.Errorf("reloads{error} = %v", got)
	}
}

func TestScriptChangesAreReloadedByPolling(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.lua", versionOne)
	s := openPath(t, dir, func(o *Options) { o.ReloadInterval = 10 * time.Millisecond })
	writeFile(t, dir, "b.lua", `tool{name = "from_b", handler = function() return "b" end}`)
	waitFor(t, func() bool { return toolNames(t, s) == "version,from_b" })
	if got := okJSON(t, invokeOne(t, s, "from_b", `{}`)); got != `"b"` {
		t.Errorf("from_b: %s", got)
	}
}

func TestClosedSourceFailsBatches(t *testing.T) {
	var logs logBuffer
	path := writeFile(t, t.TempDir(), "a.lua", versionOne)
	s, err := Open("test", path, Options{Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan tool.Result, 1)
	go func() {
		res, err := s.InvokeBatch(context.Background(), []tool.Call{newCall("a", "version", `{"s":10}`)})
		if err != nil {
			t.Error(err)
		}
		waiting <- res[0]
	}()
	waitFor(t, func() bool { return strings.Contains(logs.String(), "started") })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-waiting:
		if msg := errText(t, r); !strings.Contains(msg, "closed") {
			t.Errorf("the waiting call: %q", msg)
		}
	case <-time.After(deadline):
		t.Fatal("the waiting call did not end when the source closed")
	}
	if _, err := s.InvokeBatch(context.Background(), []tool.Call{newCall("b", "version", `{}`)}); err == nil {
		t.Error("InvokeBatch on a closed source: no error")
	}
	if _, err := s.Tools(context.Background()); err == nil {
		t.Error("Tools on a closed source: no error")
	}
}
