package lua_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/internal/tools/lua"
	"github.com/parleyhq/parley/tool"
)

const benchScript = `
tool{name = "nap", handler = function(input) sleep(input.s); return true end}
tool{name = "echo", input_schema = {properties = {x = {type = "integer"}}}, handler = function(input) return input.x end}`

func openBench(b *testing.B) *lua.Source {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.lua")
	if err := os.WriteFile(path, []byte(benchScript), 0o600); err != nil {
		b.Fatal(err)
	}
	s, err := lua.Open("bench", path, lua.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func benchCalls(n int, name, args string) []tool.Call {
	calls := make([]tool.Call, n)
	for i := range calls {
		calls[i] = tool.Call{ID: fmt.Sprint("c", i), Name: name, Args: json.RawMessage(args), ChatID: "bench"}
	}
	return calls
}

func runBatch(b *testing.B, s *lua.Source, calls []tool.Call) {
	res, err := s.InvokeBatch(context.Background(), calls)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if r.IsError {
			b.Fatalf("error result: %s", r.Output)
		}
	}
}

// BenchmarkBatchOf1000Sleeps is one batch of 1,000 calls that each
// sleep(0.05): the waits overlap, so the target is under 150 ms.
func BenchmarkBatchOf1000Sleeps(b *testing.B) {
	s := openBench(b)
	calls := benchCalls(1000, "nap", `{"s":0.05}`)
	for b.Loop() {
		runBatch(b, s, calls)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/batch")
}

// BenchmarkDispatchPerCall is the cost of a call whose handler returns at
// once: a coroutine, the arguments into Lua, the result out as JSON. The
// target is under 30 µs a call.
func BenchmarkDispatchPerCall(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			s := openBench(b)
			calls := benchCalls(n, "echo", `{"x":7}`)
			for b.Loop() {
				runBatch(b, s, calls)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/call")
		})
	}
}

// goSource is a Go tool source whose one tool sleeps for its "s" seconds.
type goSource struct{}

func (goSource) Name() string { return "go" }
func (goSource) Tools(context.Context) ([]tool.Decl, error) {
	return []tool.Decl{{Name: "go_nap", InputSchema: json.RawMessage(`{"type":"object"}`)}}, nil
}
func (goSource) InvokeBatch(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := make([]tool.Result, len(calls))
	for i := range out {
		out[i] = tool.JSON(true)
	}
	return out, nil
}
func (goSource) Close() error { return nil }

// BenchmarkStepWithLuaAndGoSources is one step through the dispatcher where
// a Lua source and a Go source each take 100 ms: they run at once, so the
// step takes about 100 ms, not 200.
func BenchmarkStepWithLuaAndGoSources(b *testing.B) {
	log := slog.New(slog.DiscardHandler)
	reg := tools.NewRegistry(log)
	for _, src := range []tool.Source{openBench(b), goSource{}} {
		if err := reg.AddSource(context.Background(), src); err != nil {
			b.Fatal(err)
		}
	}
	d := tools.NewDispatcher(reg, tools.Options{}, log)
	step := tools.Step{ChatID: "bench", Calls: []chat.ToolCall{
		{ToolCallID: "l", ToolName: "nap", Args: json.RawMessage(`{"s":0.1}`)},
		{ToolCallID: "g", ToolName: "go_nap", Args: json.RawMessage(`{}`)},
	}}
	for b.Loop() {
		out := d.Run(context.Background(), step)
		if len(out.Results) != 2 || out.Results[0].IsError || out.Results[1].IsError {
			b.Fatalf("outcome: %+v", out)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/step")
}
