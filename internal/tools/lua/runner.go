package lua

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	glua "github.com/yuin/gopher-lua"

	"github.com/parleyhq/parley/tool"
)

// runner is one Lua state and the event loop that owns it. Only the loop's
// goroutine touches L, its values and the calls' coroutines; other
// goroutines talk to it through channels. A source has one current runner;
// an older one, retired by a reload or a runaway, finishes the calls it has
// in flight and exits.
type runner struct {
	src     *Source
	scripts *scriptSet
	L       *glua.LState
	kinds   *jsonKinds
	marker  *glua.LUserData // what a host function that waits yields
	base    *glua.LFunction // the bottom of every call's coroutine
	tools   map[string]*glua.LFunction
	decls   []tool.Decl
	loading bool // tool{} is accepted only while the scripts load

	running *callState              // the call whose coroutine runs now
	nested  int                     // coroutine resumes under way (see maxNested)
	calls   map[*callState]struct{} // in flight
	free    []*glua.LState          // coroutines of calls that returned, for reuse

	inbox       chan *batch
	completions chan completion
	retiring    chan struct{} // closed: start no new batches, exit when idle
	closing     chan struct{} // closed: fail the calls in flight, exit now
	dead        chan struct{} // closed: abandoned while stuck in Go code
	exited      chan struct{} // closed when the loop has returned

	busy atomic.Pointer[time.Time] // while Lua runs: the running call's deadline

	retireOnce, closeOnce, deadOnce, keepOnce sync.Once
}

// callState is one call on its way through the loop.
type callState struct {
	b      *batch
	i      int
	call   tool.Call
	th     *glua.LState // the call's coroutine
	ctx    context.Context
	cancel context.CancelFunc
	wait   *wait // set by a host function about to yield, taken by the loop
}

// wait is what a host function waits for: run does the waiting off the loop
// and must return when ctx is done; finish, on the loop, turns the outcome
// into the values the host function returns to Lua.
type wait struct {
	run    func(ctx context.Context) (any, error)
	finish func(v any, err error) []glua.LValue
}

// completion is a finished wait, sent back to the loop.
type completion struct {
	cs  *callState
	w   *wait
	v   any
	err error
}

// batch is one InvokeBatch: its calls and, as the loop finishes them, their
// results. mu guards results against an InvokeBatch that gives up on a
// runner stuck in Go code.
type batch struct {
	ctx   context.Context
	calls []tool.Call

	mu        sync.Mutex
	results   []tool.Result
	finished  []bool
	left      int
	abandoned bool
	done      chan struct{} // closed when every call has a result
}

func newBatch(ctx context.Context, calls []tool.Call) *batch {
	return &batch{ctx: ctx, calls: calls, results: make([]tool.Result, len(calls)),
		finished: make([]bool, len(calls)), left: len(calls), done: make(chan struct{})}
}

// finish stores the result of call i.
func (b *batch) finish(i int, res tool.Result) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.abandoned || b.finished[i] {
		return
	}
	b.results[i], b.finished[i] = res, true
	if b.left--; b.left == 0 {
		close(b.done)
	}
}

// abandon answers every unfinished call with msg and returns the results;
// the loop can no longer change them.
func (b *batch) abandon(msg string) []tool.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.abandoned = true
	for i, ok := range b.finished {
		if !ok {
			b.results[i] = tool.Errorf("%s", msg)
		}
	}
	return b.results
}

// start hands the runner to its own goroutine.
func (r *runner) start() { go r.loop() }

func (r *runner) loop() {
	defer close(r.exited)
	defer r.L.Close()
	inbox, retiring := r.inbox, r.retiring
	for inbox != nil || len(r.calls) > 0 {
		select {
		case b := <-inbox:
			r.startBatch(b)
		case c := <-r.completions:
			r.complete(c)
		case <-retiring:
			inbox, retiring = nil, nil
		case <-r.closing:
			for cs := range r.calls {
				r.end(cs, tool.Errorf("not finished: tool source %q was closed", r.src.name))
			}
			return
		case <-r.dead:
			return
		}
	}
}

// retire makes the loop exit once the calls in flight are finished.
func (r *runner) retire() { r.retireOnce.Do(func() { close(r.retiring) }) }

// close makes the loop fail the calls in flight and exit; it retires the
// runner too, so a batch on its way in goes back to the (closed) source.
func (r *runner) close() {
	r.retire()
	r.closeOnce.Do(func() { close(r.closing) })
}

// startBatch starts a coroutine for each call of b.
func (r *runner) startBatch(b *batch) {
	for i, c := range b.calls {
		if b.ctx.Err() != nil {
			b.finish(i, tool.Errorf("%s", r.src.stopped(context.Cause(b.ctx), false)))
			continue
		}
		handler, ok := r.tools[c.Name]
		if !ok {
			b.finish(i, tool.Errorf("tool %q is not declared by the scripts of Lua source %q", c.Name, r.src.name))
			continue
		}
		input, err := r.kinds.decode(argsOrEmpty(c.Args))
		if err != nil {
			b.finish(i, tool.Errorf("arguments are not valid JSON: %v", err))
			continue
		}
		cs := &callState{b: b, i: i, call: c}
		cs.ctx, cs.cancel = context.WithTimeoutCause(b.ctx, r.src.opts.CallTimeout, r.src.callLimit)
		cs.th = r.thread()
		cs.th.SetContext(cs.ctx)
		r.calls[cs] = struct{}{}
		r.resume(cs, r.base, handler, input, r.callInfo(c))
	}
}

func argsOrEmpty(args []byte) []byte {
	if len(args) == 0 {
		return []byte("{}")
	}
	return args
}

// callInfo is a handler's second argument: {id =, chat =, tool =}.
func (r *runner) callInfo(c tool.Call) *glua.LTable {
	t := r.L.CreateTable(0, 3)
	t.RawSetString("id", glua.LString(c.ID))
	t.RawSetString("chat", glua.LString(c.ChatID))
	t.RawSetString("tool", glua.LString(c.Name))
	return t
}

// resume runs the call's coroutine until it waits, returns or fails.
func (r *runner) resume(cs *callState, fn *glua.LFunction, args ...glua.LValue) {
	deadline, _ := cs.ctx.Deadline()
	r.running = cs
	r.busy.Store(&deadline)
	st, err, vals := r.L.Resume(cs.th, fn, args...)
	r.busy.Store(nil)
	r.running = nil

	w := cs.wait
	cs.wait = nil
	switch {
	case st == glua.ResumeYield && w != nil && len(vals) > 0 && vals[0] == r.marker:
		go r.await(cs, w)
	case w != nil:
		// A host function yielded where gopher-lua cannot suspend (a
		// metamethod called by the VM): the coroutine is in no state to trust.
		r.end(cs, tool.Errorf("%s", "a host function that waits (sleep, http) was called where Lua cannot wait, such as inside a metamethod; call it from the handler"))
		r.src.replace(r, "a host function waited inside a metamethod")
	case st == glua.ResumeYield:
		r.end(cs, tool.Errorf("coroutine.yield was called outside of a coroutine"))
	case err != nil && cs.ctx.Err() != nil:
		r.stop(cs, true)
	case err != nil:
		r.end(cs, tool.Errorf("%s", r.errorMessage(err)))
	default:
		r.end(cs, r.output(vals))
		r.recycle(cs.th)
	}
}

// maxFree bounds the coroutines kept for reuse.
const maxFree = 256

// thread returns a coroutine for a call: a reused one or a new one. Making a
// gopher-lua coroutine allocates a whole state's worth of bookkeeping, the
// largest part of a quick call's cost.
func (r *runner) thread() *glua.LState {
	if n := len(r.free); n > 0 {
		th := r.free[n-1]
		r.free = r.free[:n-1]
		return th
	}
	th, _ := r.L.NewThread()
	return th
}

// recycle keeps the coroutine of a call that returned normally: its stack is
// empty again, so only its "dead" mark needs undoing. A coroutine that failed
// or was abandoned mid-wait is left to the garbage collector.
func (r *runner) recycle(th *glua.LState) {
	if len(r.free) < maxFree {
		th.Dead = false
		r.free = append(r.free, th)
	}
}

// await does a host function's waiting and sends the outcome to the loop.
func (r *runner) await(cs *callState, w *wait) {
	v, err := w.run(cs.ctx)
	select {
	case r.completions <- completion{cs: cs, w: w, v: v, err: err}:
	case <-r.exited:
	case <-r.dead:
	}
}

// complete resumes the call whose wait is over, unless its time is up.
func (r *runner) complete(c completion) {
	if _, ok := r.calls[c.cs]; !ok {
		return
	}
	if c.cs.ctx.Err() != nil {
		r.stop(c.cs, false)
		return
	}
	r.resume(c.cs, nil, c.w.finish(c.v, c.err)...)
}

// stop ends a call whose context is done. running says the call's Lua code
// was running when it was stopped: if a time limit stopped it, it is a
// runaway, and the state it may have left half-changed is rebuilt (unless
// it was abandoned, and so counted and rebuilt already).
func (r *runner) stop(cs *callState, running bool) {
	cause := context.Cause(cs.ctx)
	limit := errors.Is(cause, r.src.callLimit) || errors.Is(cause, r.src.batchLimit)
	if running && limit && !r.abandoned() {
		r.src.runaway(r, cs.call, cause)
	}
	r.end(cs, tool.Errorf("%s", r.src.stopped(cause, running && limit)))
}

// end finishes a call with its result.
func (r *runner) end(cs *callState, res tool.Result) {
	delete(r.calls, cs)
	cs.cancel()
	cs.b.finish(cs.i, res)
}

// output turns what a handler returned into its result: the first value as
// JSON, or an error result for "return nil, message".
func (r *runner) output(vals []glua.LValue) tool.Result {
	if len(vals) >= 2 && vals[0] == glua.LNil && vals[1] != glua.LNil {
		if s, ok := vals[1].(glua.LString); ok {
			return tool.Errorf("%s", string(s))
		}
		if b, err := r.kinds.encode(vals[1]); err == nil {
			return tool.Result{Output: b, IsError: true}
		}
		return tool.Errorf("%s", vals[1].String())
	}
	var v glua.LValue = glua.LNil
	if len(vals) > 0 {
		v = vals[0]
	}
	b, err := r.kinds.encode(v)
	if err != nil {
		return tool.Errorf("the handler's return value %v", err)
	}
	return tool.Result{Output: b}
}

// stuck reports whether the loop has been running Lua longer than the
// running call's deadline plus grace: its code is stuck somewhere a context
// cannot stop it (a long pattern match in Go, say).
func (r *runner) stuck(grace time.Duration) bool {
	d := r.busy.Load()
	return d != nil && time.Since(*d) > grace
}

// abandon gives up on a stuck loop: waiting InvokeBatches answer their calls
// with errors, and the goroutine exits if it ever returns from Lua.
func (r *runner) abandon() { r.deadOnce.Do(func() { close(r.dead) }) }

// abandoned reports whether r was abandoned.
func (r *runner) abandoned() bool {
	select {
	case <-r.dead:
		return true
	default:
		return false
	}
}

// preludePosition is the position an error raised right at the bottom of a
// coroutine gets: a line of the prelude, which means nothing to a script.
var preludePosition = regexp.MustCompile(`^=prelude:\d+: `)

// errorMessage is the message of a Lua error: "weather.lua:12: boom", or
// "error: " and the JSON of a value that is not a string.
func (r *runner) errorMessage(err error) string {
	var api *glua.ApiError
	if !errors.As(err, &api) {
		return err.Error()
	}
	if s, ok := api.Object.(glua.LString); ok {
		return preludePosition.ReplaceAllString(string(s), "")
	}
	if b, err := r.kinds.encode(api.Object); err == nil {
		return "error: " + string(b)
	}
	return "error: " + api.Object.String()
}
