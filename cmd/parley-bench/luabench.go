package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/internal/tools/lua"
	"github.com/parleyhq/parley/tool"
)

// luaScript is the Lua source of the bench: nap sleeps input.s seconds,
// echo returns its input at once.
const luaScript = `
tool{name = "nap", description = "sleeps", input_schema = {properties = {s = {type = "number"}}},
  handler = function(input) sleep(input.s); return true end}
tool{name = "echo", description = "answers at once", input_schema = {properties = {x = {type = "integer"}}},
  handler = function(input) return input.x end}
`

// Sizes of the Lua measurements.
const (
	luaSleepCalls    = 1000
	luaSleep         = 50 * time.Millisecond
	luaDispatchCalls = 100
	luaStepSleep     = 100 * time.Millisecond
	luaWarmup        = 20 // echo batches before the dispatch measurement
)

// luaResult is what the Lua measurements found; each is sorted.
type luaResult struct {
	sleepBatches latencies // one batch of luaSleepCalls calls of sleep(0.05)
	echoBatches  latencies // one batch of luaDispatchCalls calls that return at once
	steps        latencies // one dispatcher step: a Lua and a Go source, 100 ms each
}

// measureLua opens a Lua source on a temporary script and times, rounds
// times each, a batch of 1,000 sleeping calls and a dispatcher step with a
// Lua and a Go source that each take 100 ms; and, batches times, a batch
// of 100 calls whose handler returns at once.
func measureLua(ctx context.Context, rounds, batches int, log *slog.Logger) (luaResult, error) {
	var res luaResult
	dir, err := os.MkdirTemp("", "parley-bench-lua-")
	if err != nil {
		return res, fmt.Errorf("lua: temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "bench.lua")
	if err := os.WriteFile(path, []byte(luaScript), 0o600); err != nil {
		return res, fmt.Errorf("lua: write script: %w", err)
	}
	src, err := lua.Open("bench_lua", path, lua.Options{Logger: log})
	if err != nil {
		return res, err
	}
	defer src.Close()

	sleeps := luaCalls(luaSleepCalls, "nap", fmt.Sprintf(`{"s":%g}`, luaSleep.Seconds()))
	echoes := luaCalls(luaDispatchCalls, "echo", `{"x":7}`)
	timeBatch := func(calls []tool.Call) (time.Duration, error) {
		start := time.Now()
		out, err := src.InvokeBatch(ctx, calls)
		d := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("lua batch: %w", err)
		}
		for _, r := range out {
			if r.IsError {
				return 0, fmt.Errorf("lua batch: error result %s", r.Output)
			}
		}
		return d, nil
	}
	for range rounds {
		d, err := timeBatch(sleeps)
		if err != nil {
			return res, err
		}
		res.sleepBatches = append(res.sleepBatches, d)
	}
	for i := range luaWarmup + batches {
		d, err := timeBatch(echoes)
		if err != nil {
			return res, err
		}
		if i >= luaWarmup {
			res.echoBatches = append(res.echoBatches, d)
		}
	}

	reg := tools.NewRegistry(log)
	goSrc := &napSource{name: "bench_go", tools: []string{"go_nap"}, d: luaStepSleep, slowest: &slowest{}}
	for _, s := range []tool.Source{src, goSrc} {
		if err := reg.AddSource(ctx, s); err != nil {
			return res, fmt.Errorf("register %s: %w", s.Name(), err)
		}
	}
	disp := tools.NewDispatcher(reg, tools.Options{}, log)
	step := tools.Step{ChatID: "bench", Calls: []chat.ToolCall{
		{ToolCallID: "lua", ToolName: "nap", Args: json.RawMessage(fmt.Sprintf(`{"s":%g}`, luaStepSleep.Seconds()))},
		{ToolCallID: "go", ToolName: "go_nap", Args: json.RawMessage(`{"n":0}`)},
	}}
	for range rounds {
		start := time.Now()
		out := disp.Run(ctx, step)
		d := time.Since(start)
		if len(out.Results) != 2 || len(out.Failures) > 0 || out.Results[0].IsError || out.Results[1].IsError {
			return res, fmt.Errorf("lua and go step: %+v", out)
		}
		res.steps = append(res.steps, d)
	}
	for _, l := range []latencies{res.sleepBatches, res.echoBatches, res.steps} {
		slices.Sort(l)
	}
	return res, nil
}

func luaCalls(n int, name, args string) []tool.Call {
	calls := make([]tool.Call, n)
	for i := range calls {
		calls[i] = tool.Call{ID: fmt.Sprint("call_", i), Name: name, Args: json.RawMessage(args), ChatID: "bench"}
	}
	return calls
}
