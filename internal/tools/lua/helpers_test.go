package lua

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/tool"
)

// deadline bounds every wait of these tests, so a broken source fails them
// instead of hanging.
const deadline = 10 * time.Second

// writeFile writes a script into dir and returns its path.
func writeFile(t testing.TB, dir, name, code string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// openSource writes code as main.lua in a fresh folder and opens it as
// source "test"; the source is closed when the test ends.
func openSource(t testing.TB, code string, tune ...func(*Options)) *Source {
	t.Helper()
	path := writeFile(t, t.TempDir(), "main.lua", code)
	return openPath(t, path, tune...)
}

func openPath(t testing.TB, path string, tune ...func(*Options)) *Source {
	t.Helper()
	opts := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range tune {
		f(&opts)
	}
	s, err := Open("test", path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func newCall(id, name, args string) tool.Call {
	return tool.Call{ID: id, Name: name, Args: json.RawMessage(args), ChatID: "chat-1"}
}

// invoke runs one batch and fails the test on a source-level error.
func invoke(t testing.TB, s *Source, calls ...tool.Call) []tool.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	res, err := s.InvokeBatch(ctx, calls)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(calls) {
		t.Fatalf("%d results for %d calls", len(res), len(calls))
	}
	return res
}

// invokeOne runs one call and returns its result.
func invokeOne(t testing.TB, s *Source, name, args string) tool.Result {
	t.Helper()
	return invoke(t, s, newCall("c1", name, args))[0]
}

// okJSON returns the output of a successful result as compact JSON text.
func okJSON(t testing.TB, r tool.Result) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("error result: %s", r.Output)
	}
	return string(r.Output)
}

// errText returns the message of an error result.
func errText(t testing.TB, r tool.Result) string {
	t.Helper()
	if !r.IsError {
		t.Fatalf("not an error result: %s", r.Output)
	}
	var s string
	if err := json.Unmarshal(r.Output, &s); err != nil {
		t.Fatalf("error output is not a JSON string: %s", r.Output)
	}
	return s
}

// logBuffer collects log lines, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
