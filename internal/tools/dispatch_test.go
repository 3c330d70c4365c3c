package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/tool"
)

var dynWeather = chat.DynamicTool{Name: "get_weather", Description: "client side",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}

func weatherCall(id, city string) chat.ToolCall {
	return chat.ToolCall{ToolCallID: id, ToolName: "get_weather", Args: json.RawMessage(fmt.Sprintf(`{"city":%q}`, city))}
}

// TestRunMixedStep runs one step mixing two single Tools, two Sources and
// dynamic calls: each source gets one batch holding exactly its calls in call
// order, the sources and a Tool run at the same time (a barrier only they can
// complete together), results come back in call order and the dynamic calls
// are left pending.
func TestRunMixedStep(t *testing.T) {
	bar := newBarrier(3) // source a, source b and tool "clock" must be inside at once
	var missed atomic.Int32
	meet := func() {
		if !bar.arrive() {
			missed.Add(1)
		}
	}
	srcA := newFakeSource("a", "a_one", "a_two")
	srcA.invoke = func(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
		meet()
		return sourceEcho("a", calls), nil
	}
	srcB := newFakeSource("b", "b_one")
	srcB.invoke = func(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
		meet()
		return sourceEcho("b", calls), nil
	}
	clock := echoTool("clock", func(context.Context) error { meet(); return nil })
	reg := newRegistry(t, []tool.Tool{clock, echoTool("dice", nil)}, srcA, srcB)
	d := NewDispatcher(reg, Options{}, discard())

	calls := []chat.ToolCall{
		call("c1", "a_one", 1),
		call("c2", "clock", 2),
		weatherCall("c3", "Paris"),
		call("c4", "b_one", 4),
		call("c5", "a_two", 5),
		call("c6", "dice", 6),
		call("c7", "a_one", 7),
		weatherCall("c8", "Oslo"),
	}
	out := d.Run(context.Background(), Step{ChatID: "chat-1", Calls: calls, Dynamic: []chat.DynamicTool{dynWeather}})

	if n := missed.Load(); n != 0 {
		t.Fatalf("%d parties waited in vain: the sources and the tool did not run at the same time", n)
	}
	if len(out.Failures) != 0 {
		t.Fatalf("failures: %v", out.Failures)
	}
	batchesA, batchesB := srcA.recorded(), srcB.recorded()
	if len(batchesA) != 1 || !slices.Equal(callIDs(batchesA[0]), []string{"c1", "c5", "c7"}) {
		t.Fatalf("source a got batches %v, want one batch [c1 c5 c7]", batchesA)
	}
	if len(batchesB) != 1 || !slices.Equal(callIDs(batchesB[0]), []string{"c4"}) {
		t.Fatalf("source b got batches %v, want one batch [c4]", batchesB)
	}
	for _, c := range batchesA[0] {
		if c.ChatID != "chat-1" {
			t.Errorf("call %s has chat id %q", c.ID, c.ChatID)
		}
	}
	if got := string(batchesA[0][1].Args); got != `{"x":5}` {
		t.Errorf("c5 args = %s", got)
	}
	if got, want := resultIDs(out.Results), []string{"c1", "c2", "c4", "c5", "c6", "c7"}; !slices.Equal(got, want) {
		t.Fatalf("results in order %v, want %v", got, want)
	}
	for _, p := range out.Results {
		if p.Type != chat.PartToolResult || p.IsError {
			t.Errorf("result %s: %+v", p.ToolCallID, p)
		}
	}
	wantOut := map[string]string{
		"c1": `{"args":{"x":1},"source":"a","tool":"a_one"}`,
		"c2": `{"args":{"x":2},"chat":"chat-1","tool":"clock"}`,
		"c4": `{"args":{"x":4},"source":"b","tool":"b_one"}`,
		"c6": `{"args":{"x":6},"chat":"chat-1","tool":"dice"}`,
	}
	for id, want := range wantOut {
		if got := string(resultByID(t, out.Results, id).Output); got != want {
			t.Errorf("output of %s = %s, want %s", id, got, want)
		}
	}
	var pending []string
	for _, c := range out.Awaiting {
		pending = append(pending, c.ToolCallID)
	}
	if !slices.Equal(pending, []string{"c3", "c8"}) {
		t.Fatalf("pending %v, want [c3 c8]", pending)
	}
}

func TestRunUnknownTool(t *testing.T) {
	reg := newRegistry(t, []tool.Tool{echoTool("dice", nil)}, newFakeSource("a", "a_one"))
	d := NewDispatcher(reg, Options{}, discard())
	out := d.Run(context.Background(), Step{Calls: []chat.ToolCall{call("c1", "nope", 1), call("c2", "dice", 2)},
		Dynamic: []chat.DynamicTool{dynWeather}})
	msg := errorText(t, out.Results[0])
	for _, want := range []string{`unknown tool "nope"`, "a_one", "dice", "get_weather"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if out.Results[1].IsError {
		t.Errorf("the known call failed: %s", out.Results[1].Output)
	}

	// A long list is cut short.
	var many []tool.Tool
	for i := range 50 {
		many = append(many, echoTool(fmt.Sprintf("t%02d", i), nil))
	}
	d = NewDispatcher(newRegistry(t, many), Options{}, discard())
	out = d.Run(context.Background(), Step{Calls: []chat.ToolCall{call("c1", "nope", 1)}})
	msg = errorText(t, out.Results[0])
	if !strings.Contains(msg, "and 30 more") || strings.Contains(msg, "t49") {
		t.Errorf("message not cut short: %q", msg)
	}
}

// TestRunOnlySelectedServerTools: a step of a chat that selected some
// server-side tools runs those; a call to another server-side tool (a single
// Tool or a source's) is answered as an unknown tool not available in the
// chat, listing what the chat may call, and does not run; dynamic tools are
// not selected by the globs.
func TestRunOnlySelectedServerTools(t *testing.T) {
	var diceRan, clockRan atomic.Int32
	dice := echoTool("dice", func(context.Context) error { diceRan.Add(1); return nil })
	clock := echoTool("clock", func(context.Context) error { clockRan.Add(1); return nil })
	src := newFakeSource("a", "a_one", "a_two")
	reg := newRegistry(t, []tool.Tool{dice, clock}, src)
	d := NewDispatcher(reg, Options{}, discard())
	out := d.Run(context.Background(), Step{
		Calls: []chat.ToolCall{call("c1", "dice", 1), call("c2", "clock", 2), call("c3", "a_one", 3), call("c4", "a_two", 4),
			weatherCall("c5", "Paris"), call("c6", "nope", 6)},
		Dynamic: []chat.DynamicTool{dynWeather},
		Tools:   chat.ToolGlobs{"d?ce", "a_o*"},
	})
	if got, want := resultIDs(out.Results), []string{"c1", "c2", "c3", "c4", "c6"}; !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	if len(out.Awaiting) != 1 || out.Awaiting[0].ToolCallID != "c5" {
		t.Fatalf("pending %+v, want the dynamic call c5", out.Awaiting)
	}
	if p := resultByID(t, out.Results, "c1"); p.IsError || diceRan.Load() != 1 {
		t.Fatalf("selected tool dice: %s (ran %d times)", p.Output, diceRan.Load())
	}
	if p := resultByID(t, out.Results, "c3"); p.IsError {
		t.Fatalf("selected source tool a_one: %s", p.Output)
	}
	if clockRan.Load() != 0 {
		t.Fatal("the unselected tool clock ran")
	}
	if b := src.recorded(); len(b) != 1 || !slices.Equal(callIDs(b[0]), []string{"c3"}) {
		t.Fatalf("source a got batches %v, want one batch [c3]", b)
	}
	for id, name := range map[string]string{"c2": "clock", "c4": "a_two"} {
		msg := errorText(t, resultByID(t, out.Results, id))
		if !strings.HasPrefix(msg, fmt.Sprintf("unknown tool %q: it is not available in this chat; available tools: a_one, dice, get_weather", name)) {
			t.Errorf("call of the unselected %s: %q", name, msg)
		}
	}
	if msg := errorText(t, resultByID(t, out.Results, "c6")); !strings.HasPrefix(msg, `unknown tool "nope"; available tools: a_one, dice, get_weather`) {
		t.Errorf("call of an unknown tool: %q", msg)
	}

	// An empty selection takes no server-side tool; nil takes every one.
	out = d.Run(context.Background(), Step{Calls: []chat.ToolCall{call("c1", "dice", 1)}, Tools: chat.ToolGlobs{}})
	if msg := errorText(t, out.Results[0]); !strings.Contains(msg, "not available in this chat; no tools are available") {
		t.Errorf("empty selection: %q", msg)
	}
	out = d.Run(context.Background(), Step{Calls: []chat.ToolCall{call("c1", "clock", 1)}})
	if out.Results[0].IsError || clockRan.Load() != 1 {
		t.Errorf("no selection: %s", out.Results[0].Output)
	}
}

func TestRunInvalidArgsAreNotExecuted(t *testing.T) {
	var ran atomic.Int32
	counted := echoTool("dice", func(context.Context) error { ran.Add(1); return nil })
	src := newFakeSource("a", "a_one")
	reg := newRegistry(t, []tool.Tool{counted}, src)
	d := NewDispatcher(reg, Options{}, discard())
	out := d.Run(context.Background(), Step{
		Calls: []chat.ToolCall{
			{ToolCallID: "c1", ToolName: "dice", Args: json.RawMessage(`{"x":"one"}`)},
			{ToolCallID: "c2", ToolName: "dice", Args: json.RawMessage(`{"x":1`)},
			{ToolCallID: "c3", ToolName: "a_one", Args: json.RawMessage(`{}`)},
			{ToolCallID: "c4", ToolName: "get_weather", Args: json.RawMessage(`{"city":7}`)},
			{ToolCallID: "c5", ToolName: "get_weather", Args: nil},
		},
		Dynamic: []chat.DynamicTool{dynWeather},
	})
	if ran.Load() != 0 || len(src.recorded()) != 0 {
		t.Fatalf("invalid calls were run: tool %d times, source %d batches", ran.Load(), len(src.recorded()))
	}
	if len(out.Awaiting) != 0 {
		t.Fatalf("invalid dynamic calls are pending: %v", out.Awaiting)
	}
	want := map[string]string{
		"c1": "got string, want integer",
		"c2": "not valid JSON",
		"c3": "missing property 'x'",
		"c4": "got number, want string",
		"c5": "missing property 'city'",
	}
	for id, w := range want {
		if msg := errorText(t, resultByID(t, out.Results, id)); !strings.Contains(msg, w) {
			t.Errorf("%s: message %q lacks %q", id, msg, w)
		}
	}
}

func TestRunEmptyArgsMeanEmptyObject(t *testing.T) {
	var got json.RawMessage
	noArgs := tool.Func(tool.Decl{Name: "ping"}, func(ctx context.Context, c tool.Call) (tool.Result, error) {
		got = c.Args
		return tool.Text("pong"), nil
	})
	d := NewDispatcher(newRegistry(t, []tool.Tool{noArgs}), Options{}, discard())
	out := d.Run(context.Background(), Step{Calls: []chat.ToolCall{{ToolCallID: "c1", ToolName: "ping"}}})
	if out.Results[0].IsError || string(got) != "{}" || string(out.Results[0].Output) != `"pong"` {
		t.Fatalf("result %s, args seen %s", out.Results[0].Output, got)
	}
}

// failingStep runs a step whose source "bad" fails with fail, beside a good
// source, a single Tool and a dynamic call.
func failingStep(t *testing.T, fail func(ctx context.Context, calls []tool.Call) ([]tool.Result, error)) Outcome {
	t.Helper()
	bad := newFakeSource("bad", "bad_one")
	bad.invoke = fail
	good := newFakeSource("good", "good_one")
	reg := newRegistry(t, []tool.Tool{echoTool("dice", nil)}, bad, good)
	d := NewDispatcher(reg, Options{BatchTimeout: 200 * time.Millisecond}, discard())
	return d.Run(context.Background(), Step{Calls: []chat.ToolCall{
		call("c1", "bad_one", 1),
		call("c2", "good_one", 2),
		weatherCall("c3", "Rome"),
		call("c4", "dice", 4),
		call("c5", "bad_one", 5),
	}, Dynamic: []chat.DynamicTool{dynWeather}})
}

// TestRunSourceFailure: a source-level failure (error, panic, wrong number of
// results, timeout) answers every call of its batch with the failure, keeps
// the other groups' results, answers the dynamic calls "not executed" and is
// reported for the chat's last_error.
func TestRunSourceFailure(t *testing.T) {
	cases := []struct {
		name string
		fail func(ctx context.Context, calls []tool.Call) ([]tool.Result, error)
		want string
	}{
		{"error", func(context.Context, []tool.Call) ([]tool.Result, error) {
			return nil, errors.New("runtime is gone")
		}, "runtime is gone"},
		{"panic", func(context.Context, []tool.Call) ([]tool.Result, error) {
			panic("lua state corrupted")
		}, "panic: lua state corrupted"},
		{"wrong count", func(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
			return []tool.Result{tool.Text("only one")}, nil
		}, "returned 1 results for 2 calls"},
		{"timeout", func(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, "timed out after 200ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := failingStep(t, tc.fail)
			if len(out.Failures) != 1 || out.Failures[0].Source != "bad" || !strings.Contains(out.Failures[0].Error(), tc.want) {
				t.Fatalf("failures %v, want one of source bad with %q", out.Failures, tc.want)
			}
			if len(out.Awaiting) != 0 {
				t.Fatalf("pending %v after a source failure", out.Awaiting)
			}
			if got, want := resultIDs(out.Results), []string{"c1", "c2", "c3", "c4", "c5"}; !slices.Equal(got, want) {
				t.Fatalf("results %v, want %v", got, want)
			}
			for _, id := range []string{"c1", "c5"} {
				msg := errorText(t, resultByID(t, out.Results, id))
				if !strings.Contains(msg, `tool source "bad" failed`) || !strings.Contains(msg, tc.want) {
					t.Errorf("%s: %q does not name the source's failure", id, msg)
				}
			}
			if msg := errorText(t, resultByID(t, out.Results, "c3")); msg != `not executed: tool source "bad" failed` {
				t.Errorf("dynamic call: %q", msg)
			}
			for _, id := range []string{"c2", "c4"} {
				if p := resultByID(t, out.Results, id); p.IsError {
					t.Errorf("%s lost its result: %s", id, p.Output)
				}
			}
		})
	}
}

// TestRunPartialSourceFailure: a *tool.PartialError keeps the results of the
// calls that had one; the others get the failure, saying they may have run,
// and the step is still a source failure. One with the wrong number of
// results is an ordinary failure.
func TestRunPartialSourceFailure(t *testing.T) {
	lost := errors.New("session lost")
	first := tool.Text("first")
	t.Run("kept", func(t *testing.T) {
		out := failingStep(t, func(context.Context, []tool.Call) ([]tool.Result, error) {
			return nil, &tool.PartialError{Err: lost, Results: []*tool.Result{&first, nil}}
		})
		if len(out.Failures) != 1 || out.Failures[0].Source != "bad" || !errors.Is(out.Failures[0], lost) {
			t.Fatalf("failures %v, want the lost session of bad", out.Failures)
		}
		if p := resultByID(t, out.Results, "c1"); p.IsError || string(p.Output) != `"first"` {
			t.Errorf("c1: %s (error %v), want its own result", p.Output, p.IsError)
		}
		msg := errorText(t, resultByID(t, out.Results, "c5"))
		if !strings.Contains(msg, `tool source "bad" failed: session lost`) || !strings.Contains(msg, "may have run") {
			t.Errorf("c5: %q", msg)
		}
		if msg := errorText(t, resultByID(t, out.Results, "c3")); msg != `not executed: tool source "bad" failed` {
			t.Errorf("dynamic call: %q", msg)
		}
	})
	t.Run("wrong count", func(t *testing.T) {
		out := failingStep(t, func(context.Context, []tool.Call) ([]tool.Result, error) {
			return nil, &tool.PartialError{Err: lost, Results: []*tool.Result{&first}}
		})
		if len(out.Failures) != 1 {
			t.Fatalf("failures %v", out.Failures)
		}
		for _, id := range []string{"c1", "c5"} {
			if msg := errorText(t, resultByID(t, out.Results, id)); msg != `tool source "bad" failed: session lost` {
				t.Errorf("%s: %q", id, msg)
			}
		}
	})
}

// TestRunToolFailures: an error, a panic, a timeout or bad output of a single
// Tool is that call's error result and nothing more.
func TestRunToolFailures(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	tools := []tool.Tool{
		tool.Func(tool.Decl{Name: "fails"}, func(context.Context, tool.Call) (tool.Result, error) {
			return tool.Result{}, errors.New("disk full")
		}),
		tool.Func(tool.Decl{Name: "panics"}, func(context.Context, tool.Call) (tool.Result, error) {
			var m map[string]int
			m["x"] = 1
			return tool.Result{}, nil
		}),
		tool.Func(tool.Decl{Name: "slow"}, func(ctx context.Context, _ tool.Call) (tool.Result, error) {
			<-ctx.Done()
			return tool.Result{}, ctx.Err()
		}),
		tool.Func(tool.Decl{Name: "deaf"}, func(context.Context, tool.Call) (tool.Result, error) {
			<-stuck // ignores its context: abandoned at the timeout
			return tool.Text("too late"), nil
		}),
		tool.Func(tool.Decl{Name: "garbage"}, func(context.Context, tool.Call) (tool.Result, error) {
			return tool.Result{Output: json.RawMessage(`{not json`)}, nil
		}),
		tool.Func(tool.Decl{Name: "soft"}, func(context.Context, tool.Call) (tool.Result, error) {
			return tool.Errorf("no such file"), nil
		}),
		echoTool("dice", nil),
	}
	d := NewDispatcher(newRegistry(t, tools), Options{CallTimeout: 100 * time.Millisecond}, discard())
	var calls []chat.ToolCall
	for _, name := range []string{"fails", "panics", "slow", "deaf", "garbage", "soft", "dice"} {
		calls = append(calls, call("call-"+name, name, 1))
	}
	start := time.Now()
	out := d.Run(context.Background(), Step{Calls: calls})
	if elapsed := time.Since(start); elapsed > deadline {
		t.Fatalf("Run took %s", elapsed)
	}
	if len(out.Failures) != 0 {
		t.Fatalf("single Tools caused source failures: %v", out.Failures)
	}
	want := map[string]string{
		"call-fails":   "disk full",
		"call-panics":  "panic: assignment to entry in nil map",
		"call-slow":    "timed out after 100ms",
		"call-deaf":    "timed out after 100ms",
		"call-garbage": "not valid JSON",
		"call-soft":    "no such file",
	}
	for id, w := range want {
		if msg := errorText(t, resultByID(t, out.Results, id)); !strings.Contains(msg, w) {
			t.Errorf("%s: %q lacks %q", id, msg, w)
		}
	}
	if p := resultByID(t, out.Results, "call-dice"); p.IsError {
		t.Errorf("dice failed: %s", p.Output)
	}
}

// TestRunBoundedPool: no more single-Tool calls run at once than the limit,
// and the limit is reached. The first limit calls meet at a barrier (so they
// ran at once), then stay inside for a window in which an unbounded pool
// would let more calls in; one that gets in ends the window early.
func TestRunBoundedPool(t *testing.T) {
	const limit = 3
	var cur, peak, first, missed atomic.Int32
	bar := newBarrier(limit)
	overflow := make(chan struct{})
	var once sync.Once
	busy := echoTool("busy", func(context.Context) error {
		n := cur.Add(1)
		defer cur.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n > limit {
			once.Do(func() { close(overflow) })
		}
		if first.Add(1) <= limit {
			if !bar.arrive() {
				missed.Add(1)
			}
			select { // the window: only a broken pool ends it early
			case <-overflow:
			case <-time.After(50 * time.Millisecond):
			}
		}
		return nil
	})
	d := NewDispatcher(newRegistry(t, []tool.Tool{busy}), Options{MaxConcurrentCalls: limit}, discard())
	var calls []chat.ToolCall
	for i := range 40 {
		calls = append(calls, call(fmt.Sprint("c", i), "busy", i))
	}
	out := d.Run(context.Background(), Step{Calls: calls})
	if missed.Load() != 0 {
		t.Fatalf("the first %d calls never ran at the same time", limit)
	}
	if p := peak.Load(); p != limit {
		t.Fatalf("peak concurrent calls %d, want %d", p, limit)
	}
	if len(out.Results) != 40 {
		t.Fatalf("%d results", len(out.Results))
	}
	for i, p := range out.Results {
		if p.ToolCallID != fmt.Sprint("c", i) || p.IsError {
			t.Fatalf("result %d: %+v", i, p)
		}
	}
}

// TestRunCancelled: when the step's context ends while a source's batch
// and a Tool are both running, each call answers "cancelled", in call
// order, and no source is blamed.
func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	inside := newBarrier(2) // the batch and the Tool call are both running
	var missed atomic.Int32
	src := newFakeSource("a", "a_one")
	src.invoke = func(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
		if !inside.arrive() {
			missed.Add(1)
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	waits := echoTool("waits", func(ctx context.Context) error {
		if !inside.arrive() {
			missed.Add(1)
		}
		<-ctx.Done()
		return ctx.Err()
	})
	d := NewDispatcher(newRegistry(t, []tool.Tool{waits}, src), Options{}, discard())
	go func() {
		select { // cancel once both run, or at the deadline so a broken dispatcher fails instead of hanging
		case <-inside.done:
		case <-time.After(deadline):
		}
		cancel()
	}()
	out := d.Run(ctx, Step{Calls: []chat.ToolCall{call("c1", "a_one", 1), call("c2", "waits", 2)}})
	if missed.Load() != 0 {
		t.Fatal("the batch and the Tool call never ran at the same time")
	}
	if len(out.Failures) != 0 {
		t.Fatalf("a cancelled step blamed a source: %v", out.Failures)
	}
	if len(out.Awaiting) != 0 {
		t.Fatalf("a cancelled step left calls pending: %v", out.Awaiting)
	}
	if ids := resultIDs(out.Results); !slices.Equal(ids, []string{"c1", "c2"}) {
		t.Fatalf("results for %v, want c1 and c2 in call order", ids)
	}
	for _, p := range out.Results {
		if want := chat.ReasonCancelledWhileRunning + ": context canceled"; errorText(t, p) != want {
			t.Errorf("%s: %q, want %q", p.ToolCallID, errorText(t, p), want)
		}
	}
}

// TestRunNoticesSourceListChanges: a source's new tool list, and a changed
// schema, take effect at the next step.
func TestRunNoticesSourceListChanges(t *testing.T) {
	src := newFakeSource("a", "a_one")
	d := NewDispatcher(newRegistry(t, nil, src), Options{}, discard())
	step := Step{Calls: []chat.ToolCall{{ToolCallID: "c1", ToolName: "a_new", Args: json.RawMessage(`{"y":"hello"}`)}}}

	out := d.Run(context.Background(), step)
	if msg := errorText(t, out.Results[0]); !strings.Contains(msg, "unknown tool") {
		t.Fatalf("before the change: %q", msg)
	}

	src.setDecls(tool.Decl{Name: "a_new", InputSchema: json.RawMessage(objectSchema)})
	out = d.Run(context.Background(), step)
	if msg := errorText(t, out.Results[0]); !strings.Contains(msg, "missing property 'x'") {
		t.Fatalf("after adding a_new: %q", msg)
	}

	src.setDecls(tool.Decl{Name: "a_new", InputSchema: json.RawMessage(`{"type":"object","required":["y"]}`)})
	out = d.Run(context.Background(), step)
	if out.Results[0].IsError {
		t.Fatalf("after changing a_new's schema: %s", out.Results[0].Output)
	}
	if b := src.recorded(); len(b) != 1 || b[0][0].Name != "a_new" {
		t.Fatalf("batches %v", b)
	}
}

// TestRunDynamicToolWinsOverLaterServerTool: a source that later declares a
// name one of the chat's dynamic tools already has does not take its calls.
func TestRunDynamicToolWinsOverLaterServerTool(t *testing.T) {
	src := newFakeSource("a", "a_one")
	d := NewDispatcher(newRegistry(t, nil, src), Options{}, discard())
	src.setDecls(tool.Decl{Name: "get_weather"})
	out := d.Run(context.Background(), Step{Calls: []chat.ToolCall{weatherCall("c1", "Lima")}, Dynamic: []chat.DynamicTool{dynWeather}})
	if len(out.Awaiting) != 1 || len(out.Results) != 0 || len(src.recorded()) != 0 {
		t.Fatalf("pending %v, results %v, batches %v", out.Awaiting, out.Results, src.recorded())
	}
}
