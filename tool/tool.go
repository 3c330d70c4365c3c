// Package tool is parley's public extension API for server-side tools.
//
// A Go program that embeds parley registers its own tools through it. There
// are two kinds:
//
//   - A Tool is one function the model can call. Every call runs on its own
//     goroutine, so an implementation must be safe for concurrent use.
//   - A Source is a runtime that owns many tools (a script engine, an MCP
//     server). Every call of one model step that belongs to a source arrives
//     in a single InvokeBatch, so the source decides how to run them.
//
// Tool names are unique across all server-side tools; registering a name twice
// is an error, never a silent shadowing.
package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Decl declares a tool to the model: its name, what it does, and the JSON
// Schema (of an object) its arguments must satisfy.
//
// Name must match ^[a-zA-Z0-9_-]{1,64}$, the names every provider accepts. An
// empty InputSchema means a tool without arguments ({"type": "object"}).
// parley validates every call's arguments against InputSchema before the tool
// runs, so an implementation sees only valid arguments.
//
// Annotations, when not nil, describe the tool's effects; the approval policy
// "destructive" reads them (see Annotations). A changed annotation is a
// changed declaration.
type Decl struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Annotations *Annotations    `json:"annotations,omitempty"`
}

// Annotations are hints about what a tool's calls do, named and meant as
// MCP's tool annotations are. Each is a pointer because a hint that is absent
// differs from one that is false: nil means the tool does not say.
//
// They are claims of whoever declared the tool, not guarantees. parley uses
// them for one thing: under the approval policy "destructive", a tool needs a
// person's approval unless ReadOnlyHint is true or DestructiveHint is false.
type Annotations struct {
	// ReadOnlyHint true: the tool does not modify its environment.
	ReadOnlyHint *bool `json:"readOnlyHint,omitempty"`
	// DestructiveHint false: the tool's updates only add, never delete or
	// overwrite. Meaningful only when ReadOnlyHint is not true.
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	// IdempotentHint true: calling the tool again with the same arguments
	// has no further effect.
	IdempotentHint *bool `json:"idempotentHint,omitempty"`
	// OpenWorldHint true: the tool reaches an open world of external
	// entities (the web, say), false: a closed domain.
	OpenWorldHint *bool `json:"openWorldHint,omitempty"`
}

// ReadOnly returns the annotations of a tool that only reads: readOnlyHint
// true, destructiveHint false.
func ReadOnly() *Annotations {
	yes, no := true, false
	return &Annotations{ReadOnlyHint: &yes, DestructiveHint: &no}
}

// Equal reports whether a and b give the same hints; nil equals nil only.
func (a *Annotations) Equal(b *Annotations) bool {
	if a == nil || b == nil {
		return a == b
	}
	same := func(x, y *bool) bool { return (x == nil && y == nil) || (x != nil && y != nil && *x == *y) }
	return same(a.ReadOnlyHint, b.ReadOnlyHint) && same(a.DestructiveHint, b.DestructiveHint) &&
		same(a.IdempotentHint, b.IdempotentHint) && same(a.OpenWorldHint, b.OpenWorldHint)
}

// Clone returns a copy of a that shares no pointer with it (nil for nil).
func (a *Annotations) Clone() *Annotations {
	if a == nil {
		return nil
	}
	cp := func(p *bool) *bool {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	return &Annotations{ReadOnlyHint: cp(a.ReadOnlyHint), DestructiveHint: cp(a.DestructiveHint),
		IdempotentHint: cp(a.IdempotentHint), OpenWorldHint: cp(a.OpenWorldHint)}
}

// Call is one call the model made.
type Call struct {
	ID     string          // the provider's tool call id, unique within the chat
	Name   string          // the tool's name
	Args   json.RawMessage // a JSON object that satisfies the tool's InputSchema
	ChatID string          // the chat the call belongs to
	// Progress, when not nil, reports how far the call got; parley passes
	// each report to the chat's stream as a tool-progress part. Safe for
	// concurrent use, and cheap: a source may call it as often as its
	// runtime reports.
	Progress func(Progress)
}

// Progress is a report of a call in flight: Progress of Total (Total zero
// when unknown), with an optional message.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// Result is what a call answers. Output is any JSON value (null when empty);
// IsError tells the model the call failed, so it can correct itself.
type Result struct {
	Output  json.RawMessage
	IsError bool
}

// JSON returns a successful result whose output is v encoded as JSON, or an
// error result if v cannot be encoded.
func JSON(v any) Result {
	b, err := json.Marshal(v)
	if err != nil {
		return Errorf("encode tool output: %v", err)
	}
	return Result{Output: b}
}

// Text returns a successful result whose output is the JSON string s.
func Text(s string) Result {
	b, _ := json.Marshal(s) // a string always encodes
	return Result{Output: b}
}

// Errorf returns an error result whose output is the formatted message as a
// JSON string.
func Errorf(format string, args ...any) Result {
	r := Text(fmt.Sprintf(format, args...))
	r.IsError = true
	return r
}

// Tool is a single server-side tool.
//
// parley calls Invoke on a fresh goroutine for every call, possibly many at
// once, so an implementation must be safe for concurrent use. Invoke should
// return when ctx is done: parley stops waiting at the call's timeout. A
// returned error, or a panic, becomes an error result for that call only.
type Tool interface {
	Decl() Decl
	Invoke(ctx context.Context, call Call) (Result, error)
}

// Func returns a Tool declared by decl whose calls run fn.
func Func(decl Decl, fn func(ctx context.Context, call Call) (Result, error)) Tool {
	return funcTool{decl: decl, fn: fn}
}

type funcTool struct {
	decl Decl
	fn   func(ctx context.Context, call Call) (Result, error)
}

func (t funcTool) Decl() Decl { return t.decl }

func (t funcTool) Invoke(ctx context.Context, call Call) (Result, error) {
	return t.fn(ctx, call)
}

// Source is a runtime that owns many tools.
//
// Name identifies the source in GET /api/v1/tools and in error messages; it
// must be unique among sources and not "builtin".
//
// Tools lists the source's tools. The list may change while the server runs:
// parley calls Tools at the start of every step (when it offers tools to the
// model and again when it dispatches the step's calls) and uses the new list
// from then on, so Tools must be cheap — a source backed by a remote runtime
// should answer from a cached list. If Tools fails, or the new list is invalid
// or uses a name another tool already has, parley logs the error and keeps the
// source's previous list.
//
// InvokeBatch receives every call of one step that belongs to the source, in
// call order, on one goroutine; different sources, and single Tools, run at the
// same time. It returns exactly one Result per call, in the same order. A
// failure of one call is that call's error Result. Returning an error, a
// panic, or a wrong number of results is a source-level failure: every call of
// the batch gets an error result naming the source, and the chat stops in the
// error status. A source that fails after some calls returned (a runtime lost
// part way) keeps their results by returning a *PartialError. InvokeBatch
// should return when ctx is done.
//
// Close releases the source's resources when the server shuts down.
type Source interface {
	Name() string
	Tools(ctx context.Context) ([]Decl, error)
	InvokeBatch(ctx context.Context, calls []Call) ([]Result, error)
	Close() error
}

// BatchTimeouter is implemented by a source that bounds its calls itself (a
// timeout per call, a limit on the calls in flight) and so knows how long a
// batch of them may take. BatchTimeout returns how long InvokeBatch of n
// calls may run before parley stops waiting and counts a source-level
// failure; a source that does not implement it, or returns zero, gets
// parley's default bound.
type BatchTimeouter interface {
	BatchTimeout(n int) time.Duration
}

// PartialError is a source-level failure of a batch some of whose calls had
// already returned. InvokeBatch returns it as its error (its results are then
// ignored): each call whose entry in Results is set keeps that result; each
// other call gets an error result naming the source and saying the call may
// have run. The batch is still a source-level failure, and the chat stops in
// the error status. A PartialError whose Results does not have one entry per
// call is an ordinary error.
type PartialError struct {
	Err     error
	Results []*Result // one per call, in call order; nil for a call without a result
}

func (e *PartialError) Error() string { return e.Err.Error() }
func (e *PartialError) Unwrap() error { return e.Err }

// Source states, as GET /api/v1/tools shows them.
const (
	StateReady      = "ready"      // the source's tools can be called
	StateConnecting = "connecting" // a remote runtime is being reached
	StateFailed     = "failed"     // the last attempt failed; another follows
)

// Status is a source's state and, unless ready, the last error.
type Status struct {
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// StatusReporter is implemented by a source whose availability changes,
// such as one backed by a remote server. A source that does not implement
// it is always ready.
type StatusReporter interface {
	Status() Status
}
