package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// modelName is the one model of the bench's chats.
const modelName = "bench"

// models is the engine.Models of a bench: one model served by p.
type models struct{ p llm.Provider }

func (m models) Model(name string) (llm.Model, bool) {
	if name != modelName {
		return llm.Model{}, false
	}
	return llm.Model{Name: modelName, Provider: m.p, ModelID: modelName}, true
}

// instant is an in-process model that answers at once, with no network: in
// a run of steps model calls, the first steps-1 answers call the server-side
// tool noop, the last one is a text. It counts the assistant messages of
// the history to know which step it is in.
type instant struct{ steps int }

func (p instant) Stream(_ context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	done := 0
	for _, m := range req.Messages {
		if m.Role == chat.RoleAssistant {
			done++
		}
	}
	return answerStep(done, p.steps, len(req.Messages), emit)
}

// answerStep answers the model call after done calls of a run of n calls:
// a call of the server-side tool noop while the run has more to make, else
// a text; inputs is the request's message count, reported as its usage.
func answerStep(done, n, inputs int, emit func(llm.Event) error) (llm.Result, error) {
	usage := llm.Usage{InputTokens: int64(inputs), OutputTokens: 1}
	if done < n-1 {
		id := "call_" + strconv.Itoa(done)
		for _, ev := range []llm.Event{
			{Type: llm.ToolCallStart, ToolCallID: id, ToolName: "noop"},
			{Type: llm.ToolCallDelta, Text: "{}"},
			{Type: llm.ToolCallEnd},
		} {
			if err := emit(ev); err != nil {
				return llm.Result{}, err
			}
		}
		call := chat.Part{Type: chat.PartToolCall, ToolCallID: id, ToolName: "noop", Args: json.RawMessage(`{}`)}
		return llm.Result{Parts: []chat.Part{call}, Usage: usage, FinishReason: "tool_calls"}, nil
	}
	if err := emit(llm.Event{Type: llm.TextDelta, Text: "ok"}); err != nil {
		return llm.Result{}, err
	}
	return llm.Result{Parts: []chat.Part{chat.TextPart("ok")}, Usage: usage, FinishReason: "stop"}, nil
}

// noopTools is a dispatcher with one server-side tool, noop, that answers
// at once.
func noopTools() (*tools.Dispatcher, error) {
	reg, err := noopRegistry()
	if err != nil {
		return nil, err
	}
	return tools.NewDispatcher(reg, tools.Options{}, nil), nil
}

// noopRegistry is a registry with the one server-side tool noop.
func noopRegistry() (*tools.Registry, error) {
	reg := tools.NewRegistry(nil)
	noop := tool.Func(tool.Decl{Name: "noop", Description: "does nothing", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, tool.Call) (tool.Result, error) { return tool.Text("ok"), nil })
	if err := reg.AddTool(noop); err != nil {
		return nil, fmt.Errorf("register noop tool: %w", err)
	}
	return reg, nil
}

// streamer is an in-process model that streams timestamped text deltas.
// Every call first waits until n calls are in progress (so n chats stream
// at once), then, after a random phase within one interval (so the deltas
// of all chats spread evenly), emits deltas text deltas "t=<ns>;" one
// interval apart, ns being the send time in nanoseconds since base on the
// monotonic clock. Each call then waits for release before it returns: the
// chat stays running mid-step while it is measured, and the n runs' final
// writes, which a barrier start would otherwise bunch into the last
// interval, come after the last delta.
type streamer struct {
	base     time.Time
	n        int
	deltas   int
	interval time.Duration

	started     atomic.Int64
	startAll    chan struct{} // closed when n calls have started
	holding     atomic.Int64
	allHolding  chan struct{} // closed when n calls have sent every delta
	release     chan struct{} // closed by the bench to let held calls return
	releaseOnce sync.Once
	sent        atomic.Int64 // deltas emitted
}

func newStreamer(base time.Time, n, deltas int, interval time.Duration) *streamer {
	return &streamer{base: base, n: n, deltas: deltas, interval: interval,
		startAll: make(chan struct{}), allHolding: make(chan struct{}), release: make(chan struct{})}
}

// letGo lets held calls return; safe to call more than once.
func (s *streamer) letGo() { s.releaseOnce.Do(func() { close(s.release) }) }

func (s *streamer) Stream(ctx context.Context, _ llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	if s.started.Add(1) == int64(s.n) {
		close(s.startAll)
	}
	select {
	case <-s.startAll:
	case <-ctx.Done():
		return llm.Result{}, ctx.Err()
	}
	var text strings.Builder
	text.Grow(s.deltas * 24)
	next := time.Now().Add(rand.N(s.interval))
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	for range s.deltas {
		select {
		case <-t.C:
		case <-ctx.Done():
			return llm.Result{}, ctx.Err()
		}
		d := "t=" + strconv.FormatInt(int64(time.Since(s.base)), 10) + ";"
		if err := emit(llm.Event{Type: llm.TextDelta, Text: d}); err != nil {
			return llm.Result{}, err
		}
		s.sent.Add(1)
		text.WriteString(d)
		next = next.Add(s.interval)
		t.Reset(time.Until(next))
	}
	if s.holding.Add(1) == int64(s.n) {
		close(s.allHolding)
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return llm.Result{}, ctx.Err()
	}
	return llm.Result{Parts: []chat.Part{chat.TextPart(text.String())}, Usage: llm.Usage{InputTokens: 1, OutputTokens: int64(s.deltas)}, FinishReason: "stop"}, nil
}

// clientTool is the one dynamic tool of the cycle runs' chats: the bench,
// as the client, answers its calls.
var clientTool = chat.DynamicTool{Name: "client_op", Description: "done by the client", InputSchema: json.RawMessage(`{"type":"object"}`)}

// caller is the in-process model of the cycle runs. Answering a user
// message, it calls the dynamic tool client_op; answering that call's
// result, whose output the bench makes the chat's id (a JSON string), it
// first tells arrivals that the follow-up request of that chat arrived,
// then answers a text.
type caller struct{ arrivals *arrivals }

func (p caller) Stream(_ context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	usage := llm.Usage{InputTokens: int64(len(req.Messages)), OutputTokens: 1}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == chat.RoleTool {
		at := time.Now()
		var key string
		if parts := req.Messages[n-1].Parts; len(parts) > 0 {
			_ = json.Unmarshal(parts[0].Output, &key)
		}
		p.arrivals.arrive(key, at)
		if err := emit(llm.Event{Type: llm.TextDelta, Text: "done"}); err != nil {
			return llm.Result{}, err
		}
		return llm.Result{Parts: []chat.Part{chat.TextPart("done")}, Usage: usage, FinishReason: "stop"}, nil
	}
	const id = "call_1"
	for _, ev := range []llm.Event{
		{Type: llm.ToolCallStart, ToolCallID: id, ToolName: clientTool.Name},
		{Type: llm.ToolCallDelta, Text: "{}"},
		{Type: llm.ToolCallEnd},
	} {
		if err := emit(ev); err != nil {
			return llm.Result{}, err
		}
	}
	call := chat.Part{Type: chat.PartToolCall, ToolCallID: id, ToolName: clientTool.Name, Args: json.RawMessage(`{}`)}
	return llm.Result{Parts: []chat.Part{call}, Usage: usage, FinishReason: "tool_calls"}, nil
}

// arrivals hands the arrival time of a chat's follow-up model request to
// the cycle that waits for it.
type arrivals struct {
	mu      sync.Mutex
	waiting map[string]chan time.Time
}

func newArrivals() *arrivals { return &arrivals{waiting: map[string]chan time.Time{}} }

// expect registers key before its request can arrive; forget removes it.
func (a *arrivals) expect(key string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	a.mu.Lock()
	a.waiting[key] = ch
	a.mu.Unlock()
	return ch
}

func (a *arrivals) forget(key string) {
	a.mu.Lock()
	delete(a.waiting, key)
	a.mu.Unlock()
}

// arrive records the arrival of key's request; a second one is dropped.
func (a *arrivals) arrive(key string, at time.Time) {
	a.mu.Lock()
	ch := a.waiting[key]
	a.mu.Unlock()
	if ch != nil {
		select {
		case ch <- at:
		default:
		}
	}
}
