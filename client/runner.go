package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Runner serves a program's dynamic tools: it watches the owner's feed for
// chats that wait for tool results, runs the registered handlers of their
// calls concurrently, and submits the results. With WithApprover it also
// decides on the server-side calls that wait for approval.
//
// Several runners (in one process or many) may serve the same owner: the
// server takes the first submission for a step and answers the others 409,
// which a runner treats as normal.
type Runner struct {
	c        *Client
	log      *slog.Logger
	filter   func(Chat) bool
	approver ApprovalFunc

	mu        sync.Mutex
	handlers  map[string]handler
	order     []string              // tool names in registration order
	taken     map[string]*chatCalls // chat id -> the calls this runner took on
	lastPrune time.Time
}

// chatCalls remembers the steps of one chat a runner answered, so the same
// calls, announced again by the feed or a listing, never run twice.
type chatCalls struct {
	keys     map[string]bool // the kind and the call ids of each step's calls of that kind, joined
	inFlight int             // steps being answered
	touched  time.Time       // last announcement
}

// forgetAfter is how long a runner remembers the calls of a chat it is not
// answering: far longer than any announcement of them can lag behind.
const forgetAfter = time.Minute

// handler is one registered tool.
type handler struct {
	decl DynamicTool
	run  func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
}

// RunnerOption configures a Runner.
type RunnerOption func(*Runner)

// WithLogger sets where the runner logs what it does; nothing is logged by
// default.
func WithLogger(l *slog.Logger) RunnerOption { return func(r *Runner) { r.log = l } }

// WithChatFilter makes the runner answer only the chats for which keep
// returns true (say, those with a label of this program). By default it
// answers every chat of the owner that waits for results; the calls of
// tools it has no handler for get error results.
func WithChatFilter(keep func(Chat) bool) RunnerOption {
	return func(r *Runner) { r.filter = keep }
}

// ApprovalFunc decides on one call that waits for approval (a ToolCall of
// Kind ActionApproval) of the chat ch: return Approve(call.ToolCallID),
// ApproveWithArgs or Deny. The runner sets the decision's ToolCallID to the
// call's. An error decides nothing: the runner posts no decision for that
// step, and leaves it to another decider (a person, another program) or to
// the deadline, which denies the calls.
type ApprovalFunc func(ctx context.Context, ch Chat, call ToolCall) (Decision, error)

// WithApprover makes the runner decide on the calls that wait for approval:
// it calls decide for each call of a step in turn, with a context that ends
// at the step's deadline, and posts all the step's decisions together
// (Decide). Calls of dynamic tools of the same step still go to the handlers,
// and their results are posted as well. Without an approver the runner
// leaves approvals alone: a person, or another program, decides on them.
func WithApprover(decide ApprovalFunc) RunnerOption {
	return func(r *Runner) { r.approver = decide }
}

// NewRunner returns a runner without tools; register them with Handle.
func NewRunner(c *Client, opts ...RunnerOption) *Runner {
	r := &Runner{c: c, handlers: map[string]handler{}, taken: map[string]*chatCalls{}}
	for _, o := range opts {
		o(r)
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// toolName is what the server accepts as a tool's name.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Handle registers the tool name, run by fn. Its input_schema is derived
// from In, which must be a struct (see the jsonschema tags of
// github.com/invopop/jsonschema); the model's arguments are decoded into an
// In, and fn's Out is encoded as the result's JSON. An error from fn becomes
// an error result carrying its message, so the model can react.
//
// Like http.HandleFunc, Handle panics on a programming error: an invalid or
// duplicate name, or an In that is not a JSON object.
func Handle[In, Out any](r *Runner, name, description string, fn func(context.Context, In) (Out, error)) {
	if !toolName.MatchString(name) {
		panic(fmt.Sprintf("client.Handle: tool name %q must match %s", name, toolName))
	}
	schema, err := schemaOf(reflect.TypeFor[In]())
	if err != nil {
		panic("client.Handle " + name + ": " + err.Error())
	}
	run := func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		var in In
		if len(args) > 0 && string(args) != "null" {
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, fmt.Errorf("invalid arguments: %w", err)
			}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encode the result: %w", err)
		}
		return b, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[name]; dup {
		panic(fmt.Sprintf("client.Handle: tool %q is registered twice", name))
	}
	r.handlers[name] = handler{decl: DynamicTool{Name: name, Description: description, InputSchema: schema}, run: run}
	r.order = append(r.order, name)
}

// Tools returns the declarations of the registered tools, in registration
// order: pass them as CreateChatRequest.DynamicTools.
func (r *Runner) Tools() []DynamicTool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]DynamicTool, len(r.order))
	for i, name := range r.order {
		out[i] = r.handlers[name].decl
	}
	return out
}

// Run serves the tools until ctx ends, then waits for the handlers in
// progress and returns nil. It returns an error when the feed cannot be
// opened or the first listing of waiting chats fails (a bad URL or token),
// or when the server refuses to reconnect the feed.
//
// Run first subscribes to the feed, then lists the chats already in
// requires_action, so a chat that started waiting before Run is answered
// too; it lists them again after every reconnection of the feed.
func (r *Runner) Run(ctx context.Context) error {
	feed, err := r.c.Watch(ctx)
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	defer feed.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	if err := r.scan(ctx, &wg); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	for feed.Next() {
		ev := feed.Event()
		switch {
		case ev.Kind == FeedResync:
			r.rescan(ctx, &wg)
		case ev.Kind == FeedActionRequired:
			deadline := time.Time{}
			if ev.Chat.RequiredAction != nil {
				deadline = ev.Chat.RequiredAction.Deadline
			}
			r.dispatch(ctx, &wg, ev.Chat, ev.ToolCalls, deadline)
		case ev.Chat.Status == StatusRequiresAction && ev.Chat.RequiredAction != nil:
			r.dispatch(ctx, &wg, ev.Chat, ev.Chat.RequiredAction.ToolCalls, ev.Chat.RequiredAction.Deadline)
		}
		r.prune()
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := feed.Err(); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	return nil
}

// scan answers every chat that waits for results now.
func (r *Runner) scan(ctx context.Context, wg *sync.WaitGroup) error {
	chats, err := r.c.AllChats(ctx, ListChatsOptions{Statuses: []string{StatusRequiresAction}, Archived: ArchivedAny})
	if err != nil {
		return fmt.Errorf("list chats waiting for tool results: %w", err)
	}
	for _, ch := range chats {
		if ch.RequiredAction != nil {
			r.dispatch(ctx, wg, ch, ch.RequiredAction.ToolCalls, ch.RequiredAction.Deadline)
		}
	}
	return nil
}

// rescan is scan after a reconnection: a failure is retried, since chats
// may wait, until it succeeds or ctx ends.
func (r *Runner) rescan(ctx context.Context, wg *sync.WaitGroup) {
	delay := r.c.minDelay
	for {
		err := r.scan(ctx, wg)
		if err == nil || ctx.Err() != nil {
			return
		}
		r.log.Warn("runner: could not list the waiting chats; retrying", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, r.c.maxDelay)
	}
}

// prune forgets, now and then, the chats whose calls were answered a while
// ago.
func (r *Runner) prune() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.lastPrune) < forgetAfter {
		return
	}
	r.lastPrune = now
	for id, t := range r.taken {
		if t.inFlight == 0 && now.Sub(t.touched) > forgetAfter {
			delete(r.taken, id)
		}
	}
}

// dispatch answers the calls of a chat in the background, unless this
// runner took them on already: the feed's events and the listings announce
// the same calls more than once, and stale announcements arrive after
// fresh ones. The dynamic tool calls and the approvals of a step are taken
// on separately: once one kind is answered, the chat may be announced again
// with the other alone.
func (r *Runner) dispatch(ctx context.Context, wg *sync.WaitGroup, ch Chat, calls []ToolCall, deadline time.Time) {
	if len(calls) == 0 || (r.filter != nil && !r.filter(ch)) {
		return
	}
	var client, approvals []ToolCall
	for _, c := range calls {
		if c.NeedsApproval() {
			approvals = append(approvals, c)
		} else {
			client = append(client, c)
		}
	}
	if r.approver == nil {
		approvals = nil // for a person, or another program, to decide
	}
	if r.take(ch.ID, ActionClient, client) {
		wg.Go(func() {
			r.answer(ctx, ch.ID, client, deadline)
			r.done(ch.ID)
		})
	}
	if r.take(ch.ID, ActionApproval, approvals) {
		wg.Go(func() {
			r.decide(ctx, ch, approvals, deadline)
			r.done(ch.ID)
		})
	}
}

// take reports whether the calls (of one kind, of one step of the chat) are
// new to this runner, and if so counts them in flight until done.
func (r *Runner) take(chatID, kind string, calls []ToolCall) bool {
	if len(calls) == 0 {
		return false
	}
	ids := make([]string, 0, len(calls)+1)
	ids = append(ids, kind)
	for _, c := range calls {
		ids = append(ids, c.ToolCallID)
	}
	key := strings.Join(ids, "\x00")
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.taken[chatID]
	if t == nil {
		t = &chatCalls{keys: map[string]bool{}}
		r.taken[chatID] = t
	}
	t.touched = time.Now()
	if t.keys[key] {
		return false
	}
	t.keys[key] = true
	t.inFlight++
	return true
}

// done ends what take started.
func (r *Runner) done(chatID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.taken[chatID]; t != nil {
		t.inFlight--
		t.touched = time.Now()
	}
}

// decide asks the approver about each call in turn, within the step's
// deadline, and posts the decisions together; a failing approver leaves the
// step undecided.
func (r *Runner) decide(ctx context.Context, ch Chat, calls []ToolCall, deadline time.Time) {
	dctx := ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	decisions := make([]Decision, len(calls))
	for i, call := range calls {
		d, err := r.approve(dctx, ch, call)
		if err != nil {
			r.log.Warn("runner: no decision on a call that waits for approval; leaving the step undecided",
				"chat", ch.ID, "tool", call.ToolName, "call", call.ToolCallID, "err", err)
			return
		}
		d.ToolCallID = call.ToolCallID
		decisions[i] = d
	}
	if ctx.Err() != nil {
		return
	}
	r.post(ctx, ch.ID, "decisions", len(decisions), func() error {
		_, err := r.c.Decide(ctx, ch.ID, decisions)
		return err
	})
}

// approve runs the approver on one call; a panic is an error.
func (r *Runner) approve(ctx context.Context, ch Chat, call ToolCall) (d Decision, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("runner: approver panicked", "tool", call.ToolName, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return r.approver(ctx, ch, call)
}

// answer runs the calls concurrently, each with the chat's deadline, and
// submits the results together.
func (r *Runner) answer(ctx context.Context, chatID string, calls []ToolCall, deadline time.Time) {
	hctx := ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	results := make([]ToolResult, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { results[i] = r.call(hctx, call) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	r.submit(ctx, chatID, results)
}

// call runs one call's handler; every failure is an error result.
func (r *Runner) call(ctx context.Context, call ToolCall) (res ToolResult) {
	r.mu.Lock()
	h, ok := r.handlers[call.ToolName]
	r.mu.Unlock()
	if !ok {
		r.log.Warn("runner: call of an unknown tool", "tool", call.ToolName, "call", call.ToolCallID)
		return ErrorResult(call.ToolCallID, fmt.Sprintf("unknown tool %q: no handler for it", call.ToolName))
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("runner: tool handler panicked", "tool", call.ToolName, "panic", p, "stack", string(debug.Stack()))
			res = ErrorResult(call.ToolCallID, fmt.Sprintf("tool %s failed: panic: %v", call.ToolName, p))
		}
	}()
	out, err := h.run(ctx, call.Args)
	if err != nil {
		return ErrorResult(call.ToolCallID, err.Error())
	}
	return ToolResult{ToolCallID: call.ToolCallID, Output: out}
}

// submitAttempts bounds the submissions of one set of results that fail
// for lack of an answer (network, 5xx).
const submitAttempts = 4

// submit posts the results.
func (r *Runner) submit(ctx context.Context, chatID string, results []ToolResult) {
	r.post(ctx, chatID, "tool results", len(results), func() error {
		_, err := r.c.SubmitToolResults(ctx, chatID, results)
		return err
	})
}

// post sends what (tool results or decisions) with send, retrying failures
// for lack of an answer. A 409 means another runner (or a person) answered
// first, or the chat moved on (deadline, interrupt): nothing to do. A 400
// means the calls changed meanwhile (the new ones arrive as a new action),
// or the answer was refused (edited arguments that fail the tool's schema).
func (r *Runner) post(ctx context.Context, chatID, what string, n int, send func() error) {
	delay := r.c.minDelay
	for attempt := 1; ; attempt++ {
		err := send()
		var ae *APIError
		switch {
		case err == nil:
			r.log.Debug("runner: "+what+" submitted", "chat", chatID, "count", n)
			return
		case errors.As(err, &ae) && ae.StatusCode == http.StatusConflict:
			r.log.Debug("runner: "+what+" not needed: another runner answered first, or the chat moved on", "chat", chatID, "status", ae.Details["status"])
			return
		case errors.As(err, &ae) && ae.StatusCode < 500:
			r.log.Warn("runner: "+what+" refused", "chat", chatID, "err", err)
			return
		case attempt == submitAttempts || ctx.Err() != nil:
			r.log.Error("runner: "+what+" not submitted", "chat", chatID, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, r.c.maxDelay)
	}
}
