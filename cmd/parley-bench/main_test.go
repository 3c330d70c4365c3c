package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
)

// TestMain lets the test binary be the MCP rows' server: they start
// os.Executable, which is the test binary here, with PARLEY_BENCH_MCP_SERVER=1.
func TestMain(m *testing.M) {
	if os.Getenv(mcpServerEnv) == "1" {
		os.Exit(serveMCP())
	}
	os.Exit(m.Run())
}

// small are flags that make a whole run take a few seconds.
var small = []string{"-chats", "30", "-pg-chats", "30", "-concurrency", "8", "-raw-duration", "100ms",
	"-streams", "5", "-deltas", "3", "-delta-interval", "20ms",
	"-resume-samples", "5", "-cycle-clients", "2", "-cycle-duration", "100ms", "-dispatch-steps", "3", "-lua-rounds", "1",
	"-mcp-rounds", "1", "-mcp-calls", "5",
	"-history-sizes", "10,100,1000", "-history-chats", "2", "-history-steps", "3", "-history-posts", "2",
	"-facade-requests", "3", "-fair-rounds", "3", "-fair-chats", "2000", "-compaction-turns", "40"}

// TestRunSQLite runs the whole bench, small, on SQLite only, and checks that
// the table has every SQLite row with a measured value.
func TestRunSQLite(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(small, &out, &errOut, func(string) string { return "" })
	if code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errOut)
	}
	table := out.String()
	for _, want := range []string{
		"| SQLite raw single-row commits/s (8 goroutines, 1 writer conn)",
		"| SQLite loop steps/s (30 chats × 1 step, concurrency 8)",
		"| goroutines held by 30 idle chats (SQLite, after their runs)",
		"| delta → SSE client, 1 replica, SQLite, 5 streams: p99",
		"| heap per active chat (1 replica, SQLite: running, 3 deltas streamed)",
		"| resume: POST /tool-results → next model request, SQLite, 1 replica (5 sequential cycles): p99",
		"| full cycles/s through the HTTP API, SQLite, 1 replica, 1 client",
		"| full cycles/s through the HTTP API, SQLite, 1 replica, 2 clients",
		"| dispatch overhead beyond the slowest tool, 100 calls (2 sources × 45, 10 single Tools × 1, each 5ms): median of 3 steps",
		"| Lua: one batch of 1,000 calls that each sleep(0.05), median of 1",
		"| Lua: dispatch per call, batches of 100 calls that return at once, median of 3",
		"| Lua: a step with a Lua and a Go source taking 100ms each, median of 1",
		"| MCP: a step of 100 calls to one stdio server, each waiting 50ms in it, MaxConcurrency 100: dispatcher Run, median of 1",
		"| MCP: the same 100 calls as concurrent CallTool on a plain SDK session, median of 1",
		"| MCP echo call over stdio, the SDK alone (ClientSession.CallTool), 5 calls: median",
		"| MCP echo call over stdio through parley (dispatcher Run of a one-call step), 5 calls: p99",
		"| parley's overhead per MCP call over stdio (through parley − SDK alone): medians",
		"- MCP: up to ",
		"| parley's time per step, model call excluded, after a run's first, SQLite, 10 prior messages (2 runs × 2 steps): median",
		"| parley's time per step, model call excluded, after a run's first, SQLite, 1,000 prior messages (2 runs × 2 steps): median",
		"| parley's time per step after a run's first, SQLite: 1,000 vs 10 prior messages, medians",
		"| POST /tool-results, SQLite, 10 prior messages (2 chats × 2): median",
		"| POST /tool-results, SQLite, 1,000 prior messages (2 chats × 2): median",
		"| POST /tool-results, SQLite: 1,000 vs 10 prior messages, medians",
		"| facade, SQLite, no tools (3 requests): time to first token, streamed: median",
		"| facade, SQLite, no tools (3 requests): total, not streamed: median",
		"| facade's overhead, SQLite, no tools, time to first token, streamed (facade − direct): medians",
		"| facade, SQLite, one server-side tool (3 requests): total, streamed: median",
		"| facade's overhead, SQLite, one server-side tool, total, not streamed (facade − direct): medians",
		"| a run's first step (it reads the history from the newest compaction on), SQLite: 1,000 vs 10 prior messages, medians",
		"| 40-turn chat on a 3,000-token window, SQLite: turns answered, none over the window",
		"PostgreSQL rows skipped",
		"machine: ",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("no %q in the output:\n%s", want, table)
		}
	}
	// Every delta must arrive, and no chat may keep a goroutine.
	if !rowPasses(table, "deltas received") || !rowPasses(table, "goroutines held by") || !rowPasses(table, "40-turn chat") {
		t.Errorf("a check that must pass did not:\n%s", table)
	}
	if strings.Contains(table, "error") {
		t.Errorf("a measurement failed:\n%s", table)
	}
	// The server runs a step's calls at once, not one after the other.
	if strings.Contains(table, "MCP: up to 1 of") {
		t.Errorf("the MCP server ran one call at a time:\n%s", table)
	}
}

// TestRunPostgres runs the PostgreSQL rows too, when a database is there.
func TestRunPostgres(t *testing.T) {
	dsn := os.Getenv("PARLEY_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("PARLEY_TEST_POSTGRES not set: skipping the PostgreSQL rows")
	}
	var out, errOut bytes.Buffer
	code := run(append([]string{"-postgres", dsn, "-one-replica", "postgres"}, small...), &out, &errOut, func(string) string { return "" })
	if code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errOut)
	}
	table := out.String()
	for _, want := range []string{
		"| PostgreSQL loop steps/s (30 chats × 1 step, concurrency 8)",
		"| delta → SSE client, 1 replica, PostgreSQL, 5 streams: p99",
		"| delta → SSE client, 2 replicas, PostgreSQL, 5 streams: p99",
		"| resume: POST /tool-results → next model request, PostgreSQL, 2 replicas, POST on B, engine on A (5 sequential cycles): p99",
		"| full cycles/s through the HTTP API, PostgreSQL, 2 replicas, POST on B, engine on A, 2 clients",
		"| parley's time per step after a run's first, PostgreSQL: 1,000 vs 10 prior messages, medians",
		"| POST /tool-results, PostgreSQL: 1,000 vs 10 prior messages, medians",
		"| fair AcquireChats, PostgreSQL, 2,000 pending chats of 100 owners (one with 1,010 older ones), Max 8 (3 acquisitions): p99",
		"| rounds until every owner's first chat is taken, draining by 8, fair,",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("no %q in the output:\n%s", want, table)
		}
	}
	// -one-replica postgres moves the one-replica run off SQLite.
	if strings.Count(table, "deltas received") != 2 || !rowPasses(table, "deltas received") || !rowPasses(table, "rounds until every owner's first chat") || strings.Contains(table, "error") {
		t.Errorf("want two latency runs with every delta, and no failure:\n%s", table)
	}
}

// TestSkip runs one group alone: only its rows are measured, and no
// database is opened.
func TestSkip(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"-skip", "loop, stream,cycle,lua,mcp,history,facade,fair", "-dispatch-steps", "2"}
	if code := run(args, &out, &errOut, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errOut)
	}
	table := out.String()
	if !strings.Contains(table, "| dispatch overhead beyond the slowest tool") || !strings.Contains(table, "skipped: loop, stream, cycle, lua, mcp, history, facade, fair") {
		t.Errorf("no dispatch row, or no skipped line:\n%s", table)
	}
	for _, not := range []string{"SQLite", "| Lua", "| MCP", "| resume", "| delta", "prior messages (", "| facade", "| fair"} {
		if strings.Contains(table, not) {
			t.Errorf("%q in the output of a run that skips it:\n%s", not, table)
		}
	}
	if _, err := parseFlags([]string{"-skip", "loop,bogus"}, &errOut, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("-skip bogus: err = %v, want one naming the group", err)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("10, 1_000,10000")
	if err != nil || !slices.Equal(got, []int{10, 1000, 10000}) {
		t.Errorf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"10", "10,x", "0,10", "10,,100"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted it", bad)
		}
	}
}

// TestHistoryMessage: a generated history alternates user and assistant
// turns, answers every call it makes, and never ends on an open call.
func TestHistoryMessage(t *testing.T) {
	for _, n := range []int{1, 9, 10, 11, 12, 100, 1000} {
		msgs := make([]chat.Message, n)
		for i := range n {
			msgs[i] = historyMessage("c", i, n)
		}
		if open := chat.UnresolvedCalls(msgs); len(open) > 0 {
			t.Errorf("%d messages: open calls %v", n, open)
		}
		if msgs[0].Role != chat.RoleUser {
			t.Errorf("%d messages: the first is %s", n, msgs[0].Role)
		}
		calls := 0
		for i, m := range msgs {
			if i > 0 && m.Role == msgs[i-1].Role {
				t.Fatalf("%d messages: %d and %d are both %s", n, i-1, i, m.Role)
			}
			if m.Role == chat.RoleTool {
				calls++
			}
		}
		if n >= 12 && calls != n/12 {
			t.Errorf("%d messages: %d tool results, want %d", n, calls, n/12)
		}
	}
}

// rowPasses reports whether every row whose metric contains name passes.
func rowPasses(table, name string) bool {
	found := false
	for line := range strings.Lines(table) {
		if strings.Contains(line, name) {
			found = true
			if !strings.Contains(line, "| "+pass) {
				return false
			}
		}
	}
	return found
}

func TestSendTime(t *testing.T) {
	line := []byte(`data: {"message_id":7,"part":{"type":"text-delta","text":"t=123456789;","index":0}}`)
	if d, ok := sendTime(line); !ok || d != 123456789 {
		t.Errorf("sendTime = %d, %v; want 123456789, true", d, ok)
	}
	for _, bad := range []string{`data: {"part":{"text":"hello"}}`, `data: {"part":{"text":"t=12"}}`, `data: {"part":{"text":"t=x;"}}`} {
		if _, ok := sendTime([]byte(bad)); ok {
			t.Errorf("sendTime(%s) found a time", bad)
		}
	}
}

func TestPercentile(t *testing.T) {
	var r latencyResult
	for i := 1; i <= 100; i++ {
		r.latencies = append(r.latencies, time.Duration(i))
	}
	for p, want := range map[float64]time.Duration{0.5: 50, 0.99: 99, 1: 100, 0.001: 1} {
		if got := r.percentile(p); got != want {
			t.Errorf("percentile(%g) = %d, want %d", p, got, want)
		}
	}
	if got := (latencyResult{}).percentile(0.99); got != 0 {
		t.Errorf("percentile of nothing = %d", got)
	}
}

func TestWithSearchPath(t *testing.T) {
	got, err := withSearchPath("postgres://u@h:5432/db?sslmode=disable", "s1")
	if err != nil || got != "postgres://u@h:5432/db?search_path=s1&sslmode=disable" {
		t.Errorf("URL: %q, %v", got, err)
	}
	if got, _ := withSearchPath("host=h user=u", "s1"); got != "host=h user=u search_path=s1" {
		t.Errorf("key=value: %q", got)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4321: "-4,321"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
