package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/jsonscan"
	"github.com/parleyhq/parley/tool"
)

// Options tune the dispatcher; a zero field takes its default.
type Options struct {
	// MaxConcurrentCalls bounds the single-Tool calls of one step that run at
	// once (default 16). Source batches do not count against it.
	MaxConcurrentCalls int
	// CallTimeout bounds one Tool.Invoke (default 60s); past it the call's
	// result is a "timed out" error.
	CallTimeout time.Duration
	// BatchTimeout bounds one Source.InvokeBatch (default 2m) of a source
	// that does not bound its batches itself (tool.BatchTimeouter); past it
	// the batch is a source-level failure.
	BatchTimeout time.Duration
	// MaxResultBytes caps the text of one result (default
	// chat.DefaultMaxOutputBytes); a longer one is cut, with a marker the
	// model sees (chat.Part.CapOutput).
	MaxResultBytes int
}

// Default option values.
const (
	DefaultMaxConcurrentCalls = 16
	DefaultCallTimeout        = time.Minute
	DefaultBatchTimeout       = 2 * time.Minute
)

func (o Options) withDefaults() Options {
	if o.MaxConcurrentCalls <= 0 {
		o.MaxConcurrentCalls = DefaultMaxConcurrentCalls
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = DefaultBatchTimeout
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = chat.DefaultMaxOutputBytes
	}
	return o
}

// Step is the tool calls of one assistant message and what they may call.
type Step struct {
	ChatID  string
	Calls   []chat.ToolCall    // in call order
	Dynamic []chat.DynamicTool // the chat's dynamic tools, run by the client
	// Tools is the chat's selection of server-side tools
	// (chat.ToolGlobs.Selects): nil, every one; a server-side tool it does
	// not select is unknown to the step. Dynamic tools are not selected by
	// it.
	Tools chat.ToolGlobs
	// AlsoApprove adds tools whose calls wait for a person's approval in
	// this chat, on top of those whose policy requires it.
	AlsoApprove chat.ToolGlobs
	// Approved says a person approved every call of the step: none waits.
	Approved bool
	// Progress, when not nil, receives the progress reports of the calls
	// in flight (tool.Call.Progress); it must be safe for concurrent use.
	Progress func(call chat.ToolCall, p tool.Progress)
}

// Outcome is what the server made of a step's calls.
type Outcome struct {
	// Results answers every call not left to the client, in call order.
	Results []chat.Part
	// Awaiting are the valid calls left for someone, in call order: dynamic
	// calls for the client (Kind chat.ActionClient) and server-side calls
	// that need a person's approval (chat.ActionApproval, with the tool's
	// source and description). They have not run. Empty when a source
	// failed: those calls are answered "not executed" in Results instead.
	Awaiting []chat.ToolCall
	// Failures are the source-level failures of the step, in the order of
	// each source's first call. When there is any, the chat ends in the error
	// status with last_error naming Failures[0].Source.
	Failures []*SourceError
}

// SourceError is a source-level failure: InvokeBatch returned an error,
// panicked, timed out or answered the wrong number of results.
type SourceError struct {
	Source string
	Err    error
}

func (e *SourceError) Error() string {
	return fmt.Sprintf("tool source %q failed: %v", e.Source, e.Err)
}
func (e *SourceError) Unwrap() error { return e.Err }

// Dispatcher runs the tool calls of model steps against a Registry. It is
// safe for concurrent use; each step gets its own bounded pool.
type Dispatcher struct {
	reg  *Registry
	opts Options
	log  *slog.Logger
	dyn  *schemaCache
}

// NewDispatcher returns a dispatcher over reg. A nil logger discards.
func NewDispatcher(reg *Registry, opts Options, log *slog.Logger) *Dispatcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{reg: reg, opts: opts.withDefaults(), log: log, dyn: newSchemaCache(1024)}
}

// job is one server-side call ready to run.
type job struct {
	index int // in the step's calls
	call  tool.Call
	entry *entry
}

// batch is the calls of one step that belong to one source, in call order.
type batch struct {
	source *sourceState
	jobs   []job
	err    *SourceError
}

// Run dispatches one step's calls (docs/architecture.md, "How a chat runs"). It
// refreshes the sources' tool lists first. An unknown tool name, or arguments
// that are not JSON or fail the tool's schema, get an error result and are not
// run; this holds for dynamic tools too, so the client only sees valid
// arguments. Single Tools run one goroutine each through a pool bounded by
// MaxConcurrentCalls; each source gets one InvokeBatch with exactly its calls;
// all of them run at once and Run waits for every one. A chat's dynamic tool
// takes precedence over a server-side tool of the same name, which a source
// may have declared after the chat was created. A server-side tool the
// step's Tools does not select is answered as an unknown tool. Every result
// is capped at MaxResultBytes.
func (d *Dispatcher) Run(ctx context.Context, step Step) Outcome {
	_ = d.reg.Refresh(ctx) // errors are logged; the previous lists stay in use
	cat := d.reg.snapshot()
	dynamic := make(map[string]chat.DynamicTool, len(step.Dynamic))
	for _, t := range step.Dynamic {
		dynamic[t.Name] = t
	}

	results := make([]*chat.Part, len(step.Calls))
	var singles []job
	var batches []*batch
	bySource := map[*sourceState]*batch{}
	var awaiting []int
	for i, c := range step.Calls {
		if jsonscan.Depth(c.Args) > chat.MaxStoredDepth {
			// Stored, the arguments are {} (chat.MakeStorable): the call
			// must not run, not even with those.
			results[i] = errorPart(c, "invalid arguments: nested deeper than %d levels", chat.MaxStoredDepth)
			continue
		}
		if dt, ok := dynamic[c.ToolName]; ok {
			if msg := d.checkDynamic(dt, c.Args); msg != "" {
				results[i] = errorPart(c, "%s", msg)
			} else {
				awaiting = append(awaiting, i)
			}
			continue
		}
		e, ok := cat.byName[c.ToolName]
		if !ok || !step.Tools.Selects(c.ToolName) {
			results[i] = errorPart(c, "%s", unknownTool(c.ToolName, ok, cat, step))
			continue
		}
		args, msg := checkArgs(e.schema, c.Args)
		if msg != "" {
			results[i] = errorPart(c, "tool %q: %s", c.ToolName, msg)
			continue
		}
		if !step.Approved && (e.approval.Required || step.AlsoApprove.Match(c.ToolName)) {
			awaiting = append(awaiting, i)
			continue
		}
		j := job{index: i, entry: e, call: tool.Call{ID: c.ToolCallID, Name: c.ToolName, Args: args, ChatID: step.ChatID}}
		if step.Progress != nil {
			j.call.Progress = func(p tool.Progress) { step.Progress(c, p) }
		}
		if e.source == nil {
			singles = append(singles, j)
			continue
		}
		b := bySource[e.source]
		if b == nil {
			b = &batch{source: e.source}
			bySource[e.source] = b
			batches = append(batches, b)
		}
		b.jobs = append(b.jobs, j)
	}

	var wg sync.WaitGroup
	for _, b := range batches {
		wg.Go(func() { d.runBatch(ctx, b, results) })
	}
	sem := make(chan struct{}, d.opts.MaxConcurrentCalls)
	for _, j := range singles {
		wg.Go(func() { results[j.index] = d.runSingle(ctx, sem, j) })
	}
	wg.Wait()

	var out Outcome
	for _, b := range batches {
		if b.err != nil {
			out.Failures = append(out.Failures, b.err)
		}
	}
	for _, i := range awaiting {
		c := step.Calls[i]
		if len(out.Failures) > 0 {
			results[i] = errorPart(c, "%s: tool source %q failed", chat.ReasonNotExecuted, out.Failures[0].Source)
			continue
		}
		if _, client := dynamic[c.ToolName]; client {
			c.Kind = chat.ActionClient
		} else {
			e := cat.byName[c.ToolName]
			c.Kind, c.Source, c.Description = chat.ActionApproval, e.sourceName(), e.decl.Description
		}
		out.Awaiting = append(out.Awaiting, c)
	}
	for _, p := range results {
		if p != nil {
			out.Results = append(out.Results, p.CapOutput(d.opts.MaxResultBytes))
		}
	}
	return out
}

// runSingle runs one Tool call once the step's pool has room.
func (d *Dispatcher) runSingle(ctx context.Context, sem chan struct{}, j job) *chat.Part {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return errorPartFor(j.call, "%s: cancelled: %v", chat.ReasonNotExecuted, context.Cause(ctx))
	}
	if ctx.Err() != nil { // both were ready: do not start what was cancelled
		<-sem
		return errorPartFor(j.call, "%s: cancelled: %v", chat.ReasonNotExecuted, context.Cause(ctx))
	}
	defer func() { <-sem }()
	res, err := guard(ctx, d.opts.CallTimeout, func(ctx context.Context) (tool.Result, error) {
		return j.entry.tool.Invoke(ctx, j.call)
	})
	if err != nil {
		d.logFailure("tool call failed", err, "tool", j.call.Name, "chat", j.call.ChatID)
		if ctx.Err() != nil {
			return errorPartFor(j.call, "%s: %v", chat.ReasonCancelledWhileRunning, err)
		}
		return errorPartFor(j.call, "tool %q failed: %v", j.call.Name, err)
	}
	return resultPart(j.call, res)
}

// runBatch runs one source's calls in one InvokeBatch and stores a result per
// call; a source-level failure answers every call with the failure, but for
// those a *tool.PartialError has results of, and is recorded in b.err. A
// cancelled step is no failure of the source.
func (d *Dispatcher) runBatch(ctx context.Context, b *batch, results []*chat.Part) {
	if ctx.Err() != nil { // cancelled before it started: nothing of it ran
		for _, j := range b.jobs {
			results[j.index] = errorPartFor(j.call, "%s: cancelled: %v", chat.ReasonNotExecuted, context.Cause(ctx))
		}
		return
	}
	calls := make([]tool.Call, len(b.jobs))
	for i, j := range b.jobs {
		calls[i] = j.call
	}
	res, err := guard(ctx, d.batchTimeout(b.source.src, len(calls)), func(ctx context.Context) ([]tool.Result, error) {
		return b.source.src.InvokeBatch(ctx, calls)
	})
	if err == nil && len(res) != len(calls) {
		err = fmt.Errorf("returned %d results for %d calls", len(res), len(calls))
	}
	if err == nil {
		for i, j := range b.jobs {
			results[j.index] = resultPart(j.call, res[i])
		}
		return
	}
	d.logFailure("tool source failed", err, "source", b.source.name, "chat", calls[0].ChatID, "calls", len(calls))
	var partial *tool.PartialError
	if !errors.As(err, &partial) || len(partial.Results) != len(calls) {
		partial = nil
	}
	cancelled := ctx.Err() != nil
	if !cancelled {
		b.err = &SourceError{Source: b.source.name, Err: err}
	}
	for i, j := range b.jobs {
		switch {
		case partial != nil && partial.Results[i] != nil:
			results[j.index] = resultPart(j.call, *partial.Results[i])
		case cancelled:
			results[j.index] = errorPartFor(j.call, "%s: %v", chat.ReasonCancelledWhileRunning, err)
		case partial != nil:
			results[j.index] = errorPartFor(j.call, "%v; %s", b.err, chat.ReasonNoResultMayHaveRun)
		default:
			results[j.index] = errorPartFor(j.call, "%v", b.err)
		}
	}
}

// batchTimeout returns the bound of a batch of n calls to src: its own, when
// it has one, else BatchTimeout.
func (d *Dispatcher) batchTimeout(src tool.Source, n int) time.Duration {
	if bt, ok := src.(tool.BatchTimeouter); ok {
		if t := bt.BatchTimeout(n); t > 0 {
			return t
		}
	}
	return d.opts.BatchTimeout
}

// checkDynamic validates a dynamic call's arguments against the chat's schema
// and returns what is wrong, or "".
func (d *Dispatcher) checkDynamic(t chat.DynamicTool, args json.RawMessage) string {
	sch, err := d.dyn.get(t.InputSchema)
	if err != nil {
		return fmt.Sprintf("tool %q cannot be called: %v", t.Name, err)
	}
	if _, msg := checkArgs(sch, args); msg != "" {
		return fmt.Sprintf("tool %q: %s", t.Name, msg)
	}
	return ""
}

func (d *Dispatcher) logFailure(msg string, err error, attrs ...any) {
	var p *PanicError
	if errors.As(err, &p) {
		attrs = append(attrs, "stack", string(p.Stack))
	}
	d.log.Warn(msg, append(attrs, "err", err)...)
}

// maxListedTools bounds the names an unknown-tool message lists.
const maxListedTools = 20

// unknownTool tells the model a name is unknown, or names a server-side
// tool (exists) the chat did not select, and which names the step may call.
func unknownTool(name string, exists bool, cat *catalog, step Step) string {
	names := make([]string, 0, len(cat.order)+len(step.Dynamic))
	for _, e := range cat.order {
		if step.Tools.Selects(e.decl.Name) {
			names = append(names, e.decl.Name)
		}
	}
	for _, t := range step.Dynamic {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names) // a dynamic tool may share a server-side tool's name
	msg := fmt.Sprintf("unknown tool %q", name)
	if exists {
		msg = fmt.Sprintf("unknown tool %q: it is not available in this chat", name)
	}
	switch {
	case len(names) == 0:
		return msg + "; no tools are available"
	case len(names) > maxListedTools:
		return fmt.Sprintf("%s; available tools: %s and %d more", msg, strings.Join(names[:maxListedTools], ", "), len(names)-maxListedTools)
	default:
		return msg + "; available tools: " + strings.Join(names, ", ")
	}
}

// resultPart turns a tool's result into a tool-result part. Output that is
// not JSON would corrupt the history, so it becomes an error result.
func resultPart(c tool.Call, r tool.Result) *chat.Part {
	out := r.Output
	if len(out) == 0 {
		out = json.RawMessage("null")
	} else if !json.Valid(out) {
		return errorPartFor(c, "tool %q returned output that is not valid JSON", c.Name)
	}
	return &chat.Part{Type: chat.PartToolResult, ToolCallID: c.ID, ToolName: c.Name, Output: out, IsError: r.IsError}
}

// errorPart answers a call with an error result carrying the message.
func errorPart(c chat.ToolCall, format string, args ...any) *chat.Part {
	r := tool.Errorf(format, args...)
	return &chat.Part{Type: chat.PartToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Output: r.Output, IsError: true}
}

func errorPartFor(c tool.Call, format string, args ...any) *chat.Part {
	return errorPart(chat.ToolCall{ToolCallID: c.ID, ToolName: c.Name}, format, args...)
}

// Decls lists the registry's tools, so a Dispatcher alone gives the engine
// both what to offer the model and how to run its calls.
func (d *Dispatcher) Decls(ctx context.Context) []Decl { return d.reg.Decls(ctx) }
