package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/tools"
	mcpsrc "github.com/parleyhq/parley/internal/tools/mcp"
	"github.com/parleyhq/parley/tool"
)

// mcpServerEnv, set to "1", makes the process the bench's MCP server on
// stdio instead of the bench: the MCP rows start this very binary
// (os.Executable) as their servers.
const mcpServerEnv = "PARLEY_BENCH_MCP_SERVER"

// Sizes of the MCP measurements.
const (
	mcpServer      = "bench" // the source's name: its tools are bench_wait and bench_echo
	mcpStepCalls   = 100     // calls of the waiting step
	mcpWait        = 50 * time.Millisecond
	mcpConcurrency = 100 // the source's MaxConcurrency: every call of the step in flight at once
	mcpEchoWarmup  = 100 // echo calls of each client before the timed ones
)

// serveMCP runs the bench's MCP server on stdin and stdout until stdin
// closes, and returns the process's exit status. Its tools: "wait" sleeps
// input.ms milliseconds, then answers how many wait calls were in the
// server when it started (itself included); "echo" answers input.x at once.
func serveMCP() int {
	type waitIn struct {
		MS int `json:"ms"`
	}
	type echoIn struct {
		X int `json:"x"`
	}
	var inFlight atomic.Int64
	s := sdk.NewServer(&sdk.Implementation{Name: "parley-bench", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "wait", Description: "sleeps ms milliseconds"},
		func(ctx context.Context, _ *sdk.CallToolRequest, in waitIn) (*sdk.CallToolResult, any, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			if err := nap(ctx, time.Duration(in.MS)*time.Millisecond); err != nil {
				return nil, nil, err
			}
			return mcpText(strconv.FormatInt(n, 10)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "answers x at once"},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			return mcpText(strconv.Itoa(in.X)), nil, nil
		})
	// The session ends when the client closes stdin, the normal end.
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
	return 0
}

func mcpText(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// mcpResult is what the MCP measurements found; the latencies are sorted.
type mcpResult struct {
	steps    latencies // dispatcher Run of the step of 100 waiting calls
	peak     int       // most wait calls in the server at once, as the calls saw it
	sdkSteps latencies // the same 100 calls as concurrent CallTool on the SDK session
	sdkPeak  int
	parley   latencies // dispatcher Run of a step of one echo call
	batch    latencies // the source's InvokeBatch of the same call, without the dispatcher
	sdk      latencies // the SDK's ClientSession.CallTool of the same echo call
	overhead latencies // per interleaved pair: parley's call minus the SDK's
}

// measureMCP starts two instances of the bench's MCP server over stdio:
// one as a parley MCP source (MaxConcurrency 100) behind the registry and
// the dispatcher, one on a plain SDK client session. It times rounds steps
// of 100 calls that each wait 50 ms in the server, through the dispatcher
// and, interleaved, as 100 concurrent CallTool on the SDK session (after one
// of each not counted); then calls echo calls through the dispatcher,
// through the source's InvokeBatch alone and through the SDK session,
// interleaved, after mcpEchoWarmup of each not counted.
func measureMCP(ctx context.Context, rounds, calls int, log *slog.Logger) (mcpResult, error) {
	var res mcpResult
	exe, err := os.Executable()
	if err != nil {
		return res, fmt.Errorf("mcp: the bench's own binary: %w", err)
	}
	src := mcpsrc.Open(mcpsrc.Config{
		Name:           mcpServer,
		Command:        []string{exe},
		Env:            map[string]string{mcpServerEnv: "1"},
		MaxConcurrency: mcpConcurrency,
		CallTimeout:    30 * time.Second,
		ConnectTimeout: 30 * time.Second, // a loaded machine (the race-built test binary) starts slowly
	}, mcpsrc.Options{Logger: log})
	defer src.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := src.WaitConnected(wctx); err != nil {
		return res, fmt.Errorf("mcp: connect the source: %w", err)
	}
	reg := tools.NewRegistry(log)
	if err := reg.AddSource(ctx, src); err != nil {
		return res, fmt.Errorf("mcp: register the source: %w", err)
	}
	for _, name := range []string{mcpServer + "_wait", mcpServer + "_echo"} {
		if !reg.Has(name) {
			return res, fmt.Errorf("mcp: the source offers no tool %s", name)
		}
	}
	disp := tools.NewDispatcher(reg, tools.Options{}, log)

	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), mcpServerEnv+"=1")
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "parley-bench", Version: "1"}, nil).
		Connect(wctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return res, fmt.Errorf("mcp: connect the SDK client: %w", err)
	}
	defer cs.Close()

	waitArgs := json.RawMessage(fmt.Sprintf(`{"ms":%d}`, mcpWait.Milliseconds()))
	waits := tools.Step{ChatID: "bench", Calls: make([]chat.ToolCall, mcpStepCalls)}
	for i := range waits.Calls {
		waits.Calls[i] = chat.ToolCall{ToolCallID: fmt.Sprint("call_", i), ToolName: mcpServer + "_wait", Args: waitArgs}
	}
	for i := range 1 + rounds {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		start := time.Now()
		out := disp.Run(ctx, waits)
		d := time.Since(start)
		peak, err := checkMCPStep(out, mcpStepCalls)
		if err != nil {
			return res, fmt.Errorf("mcp wait step: %w", err)
		}
		sd, sdkPeak, err := sdkWaits(ctx, cs, waitArgs)
		if err != nil {
			return res, err
		}
		if i > 0 {
			res.steps = append(res.steps, d)
			res.peak = max(res.peak, peak)
			res.sdkSteps = append(res.sdkSteps, sd)
			res.sdkPeak = max(res.sdkPeak, sdkPeak)
		}
	}

	echo := tools.Step{ChatID: "bench", Calls: []chat.ToolCall{{ToolCallID: "echo", ToolName: mcpServer + "_echo", Args: json.RawMessage(`{"x":7}`)}}}
	viaParley := func() (time.Duration, error) {
		start := time.Now()
		out := disp.Run(ctx, echo)
		d := time.Since(start)
		if len(out.Results) != 1 || len(out.Failures) > 0 || out.Results[0].IsError || string(out.Results[0].Output) != `"7"` {
			return 0, fmt.Errorf("mcp echo through the dispatcher: %+v", out)
		}
		return d, nil
	}
	batch := []tool.Call{{ID: "echo", Name: mcpServer + "_echo", Args: json.RawMessage(`{"x":7}`), ChatID: "bench"}}
	viaSource := func() (time.Duration, error) {
		start := time.Now()
		out, err := src.InvokeBatch(ctx, batch)
		d := time.Since(start)
		if err != nil || len(out) != 1 || out[0].IsError || string(out[0].Output) != `"7"` {
			return 0, fmt.Errorf("mcp echo through the source: %v %+v", err, out)
		}
		return d, nil
	}
	params := &sdk.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"x":7}`)}
	viaSDK := func() (time.Duration, error) {
		start := time.Now()
		r, err := cs.CallTool(ctx, params)
		d := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("mcp echo through the SDK: %w", err)
		}
		if t, ok := onlyText(r); r.IsError || !ok || t != "7" {
			return 0, fmt.Errorf("mcp echo through the SDK: unexpected result %+v", r)
		}
		return d, nil
	}
	// Interleaved, each path first in turn, so a machine that slows down
	// during the run slows all three alike.
	paths := []func() (time.Duration, error){viaParley, viaSource, viaSDK}
	var got [3]time.Duration
	for i := range mcpEchoWarmup + calls {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		for k := range paths {
			p := (i + k) % len(paths)
			if got[p], err = paths[p](); err != nil {
				return res, err
			}
		}
		if i >= mcpEchoWarmup {
			res.parley = append(res.parley, got[0])
			res.batch = append(res.batch, got[1])
			res.sdk = append(res.sdk, got[2])
			res.overhead = append(res.overhead, got[0]-got[2])
		}
	}
	for _, l := range []latencies{res.steps, res.sdkSteps, res.parley, res.batch, res.sdk, res.overhead} {
		slices.Sort(l)
	}
	return res, nil
}

// sdkWaits makes the wait step's calls as concurrent CallTool on the SDK
// session and returns how long they took together and the most calls in
// the server at once that they saw.
func sdkWaits(ctx context.Context, cs *sdk.ClientSession, args json.RawMessage) (time.Duration, int, error) {
	var (
		wg   sync.WaitGroup
		peak atomic.Int64
		errs = make([]error, mcpStepCalls)
	)
	start := time.Now()
	for i := range mcpStepCalls {
		wg.Go(func() {
			r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "wait", Arguments: args})
			if err != nil {
				errs[i] = err
				return
			}
			t, _ := onlyText(r)
			n, err := strconv.ParseInt(t, 10, 64)
			if r.IsError || err != nil {
				errs[i] = fmt.Errorf("unexpected result %+v", r)
				return
			}
			for {
				cur := peak.Load()
				if n <= cur || peak.CompareAndSwap(cur, n) {
					break
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, 0, fmt.Errorf("mcp wait calls through the SDK: %w", err)
	}
	return d, int(peak.Load()), nil
}

// checkMCPStep checks a step of n wait calls: every call answered without
// error. It returns the most calls in the server at once that they saw.
func checkMCPStep(out tools.Outcome, n int) (int, error) {
	if len(out.Results) != n || len(out.Failures) > 0 {
		return 0, fmt.Errorf("%d results and %d failures, want %d and 0 (%v)", len(out.Results), len(out.Failures), n, out.Failures)
	}
	peak := 0
	for _, r := range out.Results {
		var s string
		if r.IsError || json.Unmarshal(r.Output, &s) != nil {
			return 0, fmt.Errorf("call %s: %s", r.ToolCallID, r.Output)
		}
		k, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("call %s: %s", r.ToolCallID, r.Output)
		}
		peak = max(peak, k)
	}
	return peak, nil
}

// onlyText returns the text of a result that is one text block.
func onlyText(r *sdk.CallToolResult) (string, bool) {
	if len(r.Content) != 1 {
		return "", false
	}
	t, ok := r.Content[0].(*sdk.TextContent)
	if !ok {
		return "", false
	}
	return t.Text, true
}

// mcpOverheadTarget bounds parley's overhead per MCP call: its median
// minus the median of the SDK's own round trip. On the 2-core machine of
// docs/benchmarks.md that round trip is about 0.5–0.8 ms and the overhead
// has been measured between −120 and +190 µs from run to run.
const mcpOverheadTarget = 200 * time.Microsecond

// mcpRows measures an MCP source over stdio: a step of 100 waiting calls,
// and one call through parley beside the SDK's own round trip.
func (b *bench) mcpRows(ctx context.Context) {
	o := b.o
	b.step("mcp: %d steps of %d calls waiting %s each; %d echo calls through parley and through the SDK alone",
		o.mcpRounds, mcpStepCalls, mcpWait, o.mcpCalls)
	res, err := measureMCP(ctx, o.mcpRounds, o.mcpCalls, b.log)
	if err != nil {
		b.t.failed("MCP source over stdio", err)
		return
	}
	step := fmt.Sprintf("MCP: a step of %d calls to one stdio server, each waiting %s in it, MaxConcurrency %d: dispatcher Run", mcpStepCalls, mcpWait, mcpConcurrency)
	med := res.steps.percentile(0.5)
	b.t.add(limitRow(fmt.Sprintf("%s, median of %d", step, o.mcpRounds), ms(med), med, 150*time.Millisecond,
		fmt.Sprintf("< 150 ms (floor %d ms)", mcpWait.Milliseconds())))
	b.t.add(row{metric: step + ": max", value: ms(res.steps.percentile(1))})
	sdkMed := res.sdkSteps.percentile(0.5)
	b.t.add(row{metric: fmt.Sprintf("MCP: the same %d calls as concurrent CallTool on a plain SDK session, median of %d", mcpStepCalls, o.mcpRounds),
		value: ms(sdkMed), target: "reference", ratio: fmt.Sprintf("parley %.2f× SDK", float64(med)/float64(sdkMed))})
	b.t.note("MCP: up to %d of the step's %d calls were in the server at once through parley, %d through the SDK alone.", res.peak, mcpStepCalls, res.sdkPeak)

	n := thousands(int64(o.mcpCalls))
	sdkName := fmt.Sprintf("MCP echo call over stdio, the SDK alone (ClientSession.CallTool), %s calls", n)
	viaName := fmt.Sprintf("MCP echo call over stdio through parley (dispatcher Run of a one-call step), %s calls", n)
	for _, p := range []struct {
		name string
		q    float64
	}{{"median", 0.5}, {"p99", 0.99}} {
		s := res.sdk.percentile(p.q)
		b.t.add(row{metric: sdkName + ": " + p.name, value: µs(s), target: "reference"})
		v := res.parley.percentile(p.q)
		b.t.add(row{metric: viaName + ": " + p.name, value: µs(v), target: "SDK " + µs(s),
			ratio: fmt.Sprintf("%.2f× SDK", float64(v)/float64(s))})
	}
	over := res.parley.percentile(0.5) - res.sdk.percentile(0.5)
	b.t.add(limitRow("parley's overhead per MCP call over stdio (through parley − SDK alone): medians", µs(over), over,
		mcpOverheadTarget, fmt.Sprintf("< %s", µs(mcpOverheadTarget))))
	b.t.add(row{metric: "parley's overhead per MCP call over stdio (through parley − SDK alone): p99s",
		value: µs(res.parley.percentile(0.99) - res.sdk.percentile(0.99))})
	b.t.note("MCP: per interleaved pair of echo calls, parley's minus the SDK's: median %s. The source's InvokeBatch of the same call, without the dispatcher: median %s, p99 %s.",
		µs(res.overhead.percentile(0.5)), µs(res.batch.percentile(0.5)), µs(res.batch.percentile(0.99)))
}
