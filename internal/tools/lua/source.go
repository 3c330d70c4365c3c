// Package lua is the Lua tool source (docs/lua-tools.md): scripts declare
// tools with tool{...}, and every call of a model step runs as a coroutine
// in one long-lived Lua state per source, owned by one goroutine, the
// source's event loop. Host functions that wait (sleep, http.request) wait in
// Go while the other coroutines run, so a step's calls overlap.
package lua

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	glua "github.com/yuin/gopher-lua"

	"github.com/parleyhq/parley/tool"
)

// Options configure a source; a zero field takes its default, except
// ReloadInterval, where zero means no reload.
type Options struct {
	Logger  *slog.Logger // default: discard
	Metrics *Metrics     // default: counters of the source's own

	// CallTimeout bounds one call, waits included (default 30s).
	CallTimeout time.Duration
	// BatchTimeout bounds all the calls of one InvokeBatch (default 60s).
	// A batch also ends shortly before its context's deadline, so its calls
	// get their own error results rather than failing the source.
	BatchTimeout time.Duration
	// LoadTimeout bounds running the scripts' top level (default 10s).
	LoadTimeout time.Duration
	// HTTPTimeout is the timeout of an http.request that sets none
	// (default 10s).
	HTTPTimeout time.Duration
	// MaxResponseBytes caps an http response body (default 1 MiB).
	MaxResponseBytes int64
	// AllowHosts lists the hosts http.request may reach (see allowlist);
	// empty allows none.
	AllowHosts []string
	// ReloadInterval is how often the scripts are checked for changes.
	ReloadInterval time.Duration

	// hooks are extra globals, for tests.
	hooks map[string]glua.LGFunction
}

// Defaults of Options.
const (
	DefaultCallTimeout      = 30 * time.Second
	DefaultBatchTimeout     = 60 * time.Second
	DefaultLoadTimeout      = 10 * time.Second
	DefaultHTTPTimeout      = 10 * time.Second
	DefaultMaxResponseBytes = 1 << 20
)

// batchMargin is how long before its context's deadline a batch ends.
const batchMargin = 100 * time.Millisecond

// stuckGrace is how long past its deadline Lua code may keep running before
// the state is taken for stuck in Go code and abandoned.
const stuckGrace = 2 * time.Second

// maxAbandoned bounds the abandoned states of a source whose goroutine
// still runs. An abandoned goroutine is stuck in a Go function that does not
// check the call's context (the pattern functions do: see pattern.go), and
// may hold a core until it returns. With that many still running, a state
// found stuck is kept rather than abandoned, and the source's calls fail at
// once with an error that says so, until one of them ends.
const maxAbandoned = 2

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.CallTimeout, DefaultCallTimeout}, {&o.BatchTimeout, DefaultBatchTimeout}, {&o.LoadTimeout, DefaultLoadTimeout}, {&o.HTTPTimeout, DefaultHTTPTimeout}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return o
}

// Source is a Lua tool source. It implements tool.Source.
type Source struct {
	name   string
	path   string
	opts   Options
	log    *slog.Logger
	allow  allowlist
	client *http.Client

	// The causes of a call's and a batch's context when a limit ends them.
	callLimit, batchLimit error
	stuckAfter            time.Duration
	matchSteps            int // the step budget of one pattern match attempt (see pattern.go)
	maxAbandoned          int // see maxAbandoned

	mu        sync.Mutex
	cur       *runner
	live      map[*runner]struct{} // every runner not known to have exited
	abandoned int                  // runners in live that were abandoned: their goroutines still run
	hash      [sha256.Size]byte    // of the scripts last read, loaded or not
	closed    bool

	stopWatch chan struct{}
	watchDone chan struct{}
}

var _ tool.Source = (*Source)(nil)

// Open loads the scripts at path (a .lua file or a folder of them) into a
// new state and starts the source's event loop.
func Open(name, path string, opts Options) (*Source, error) {
	opts = opts.withDefaults()
	allow, err := parseAllowHosts(opts.AllowHosts)
	if err != nil {
		return nil, fmt.Errorf("lua source %q: %w", name, err)
	}
	s := &Source{
		name:         name,
		path:         path,
		opts:         opts,
		log:          opts.Logger.With("source", name),
		allow:        allow,
		client:       newHTTPClient(allow),
		callLimit:    fmt.Errorf("timed out: the call ran longer than its limit of %s", opts.CallTimeout),
		batchLimit:   fmt.Errorf("timed out: this step's calls to Lua source %q ran longer than their limit of %s", name, opts.BatchTimeout),
		stuckAfter:   stuckGrace,
		matchSteps:   defaultMatchSteps,
		maxAbandoned: maxAbandoned,
		live:         map[*runner]struct{}{},
		stopWatch:    make(chan struct{}),
		watchDone:    make(chan struct{}),
	}
	scripts, err := loadScripts(path)
	if err != nil {
		return nil, fmt.Errorf("lua source %q: %w", name, err)
	}
	r, err := s.newRunner(scripts)
	if err != nil {
		return nil, fmt.Errorf("lua source %q: %w", name, err)
	}
	s.hash = scripts.hash
	s.install(r)
	if opts.ReloadInterval > 0 {
		go s.watch(opts.ReloadInterval)
	} else {
		close(s.watchDone)
	}
	return s, nil
}

// Name returns the source's name.
func (s *Source) Name() string { return s.name }

// Tools lists the tools the current scripts declare, in declaration order.
func (s *Source) Tools(context.Context) ([]tool.Decl, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil, fmt.Errorf("lua source %q is closed", s.name)
	}
	return slices.Clone(s.cur.decls), nil
}

// current is the runner new batches go to, or nil once closed.
func (s *Source) current() *runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// install makes r the current runner, starts it, and retires the previous
// one, which finishes its calls in flight on its own state.
func (s *Source) install(r *runner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installLocked(r)
}

func (s *Source) installLocked(r *runner) {
	old := s.cur
	s.cur = r
	s.live[r] = struct{}{}
	r.start()
	go func() { <-r.exited; s.forget(r) }()
	if old != nil {
		old.retire()
	}
}

func (s *Source) forget(r *runner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, r)
	if r.abandoned() {
		s.abandoned--
		s.opts.Metrics.abandoned.WithLabelValues(s.name).Dec()
	}
}

// abandonedRunning is how many abandoned states of s still run.
func (s *Source) abandonedRunning() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abandoned
}

// replace rebuilds old's state from the scripts it was built from and makes
// it current, unless old is no longer current (a reload came first). The
// calls in flight on old finish there.
func (s *Source) replace(old *runner, why string) {
	r, err := s.newRunner(old.scripts)
	if err != nil {
		s.log.Error("rebuild the Lua state", "reason", why, "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.cur != old {
		r.L.Close()
		return
	}
	s.installLocked(r)
	s.log.Warn("Lua state rebuilt from the scripts", "reason", why)
}

// runaway records a call stopped by a time limit while its Lua code ran,
// and rebuilds the state it may have left half-changed.
func (s *Source) runaway(r *runner, c tool.Call, cause error) {
	s.opts.Metrics.runaways.WithLabelValues(s.name).Inc()
	s.log.Warn("Lua call stopped while running", "tool", c.Name, "call", c.ID, "chat", c.ChatID, "why", cause)
	s.replace(r, "a call ran past its time limit")
}

// stopped is the message of a call stopped by its context.
func (s *Source) stopped(cause error, runaway bool) string {
	switch {
	case runaway:
		return fmt.Sprintf("%v, still running Lua code (a loop that never ends?); it was stopped and the source's state rebuilt", cause)
	case errors.Is(cause, s.callLimit), errors.Is(cause, s.batchLimit):
		return cause.Error()
	default:
		return fmt.Sprintf("cancelled: %v", cause)
	}
}

// BatchTimeout is how long parley waits for a batch: the source's own
// batch_timeout, which ends the batch by itself, and a margin for its
// answer (tool.BatchTimeouter).
func (s *Source) BatchTimeout(int) time.Duration { return s.opts.BatchTimeout + 10*time.Second }

// InvokeBatch runs every call as a coroutine on the source's event loop and
// returns when all have finished. A call's failure, timeout or cancellation
// is its own error result; only a closed source fails the batch.
func (s *Source) InvokeBatch(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	deadline := time.Now().Add(s.opts.BatchTimeout)
	if d, ok := ctx.Deadline(); ok && d.Add(-batchMargin).Before(deadline) {
		deadline = d.Add(-batchMargin)
	}
	bctx, cancel := context.WithDeadlineCause(ctx, deadline, s.batchLimit)
	defer cancel()
	b := newBatch(bctx, calls)

	// Hand the batch to the current runner; a runner retired meanwhile
	// refuses it, and the next one takes it. A stuck runner is abandoned,
	// or, past the maxAbandoned bound, refuses the batch.
	tick := time.NewTicker(s.stuckAfter / 4)
	defer tick.Stop()
	var r *runner
	for submitted := false; !submitted; {
		if r = s.current(); r == nil {
			return nil, fmt.Errorf("lua source %q is closed", s.name)
		}
		if err := s.checkStuck(r); err != nil {
			return b.abandon(err.Error()), nil
		}
		inbox := r.inbox
		if r.abandoned() {
			inbox = nil // wait for its successor, which retires it
		}
		select {
		case inbox <- b:
			submitted = true
		case <-r.retiring:
		case <-tick.C:
		case <-bctx.Done():
			if err := s.checkStuck(r); err != nil {
				return b.abandon(err.Error()), nil
			}
			return b.abandon(s.stopped(context.Cause(bctx), false)), nil
		}
	}

	// Wait for the loop to finish every call. A call's time limit ends it
	// at once, unless the loop is stuck in Go code: then the state is
	// abandoned, or kept past the maxAbandoned bound.
	for {
		select {
		case <-b.done:
			return b.results, nil
		case <-r.dead:
			return b.abandon(fmt.Sprintf("not finished: the Lua state of source %q was stuck and has been rebuilt", s.name)), nil
		case <-r.exited:
			return b.abandon(fmt.Sprintf("not finished: tool source %q was closed", s.name)), nil
		case <-tick.C:
			if err := s.checkStuck(r); err != nil {
				return b.abandon(err.Error()), nil
			}
		}
	}
}

// checkStuck deals with r if it has run Lua past the running call's
// deadline by more than the grace period: it abandons r and installs a
// rebuilt state, unless maxAbandoned abandoned states of s still run. Then
// it keeps r, since abandoning it would only leave one more goroutine
// running, and returns the error the calls waiting for r get; r takes calls
// again once its code returns, and is then rebuilt as a runaway.
func (s *Source) checkStuck(r *runner) error {
	if !r.stuck(s.stuckAfter) {
		return nil
	}
	s.mu.Lock()
	if _, live := s.live[r]; !live || r.abandoned() {
		s.mu.Unlock()
		return nil
	}
	if n := s.abandoned; n >= s.maxAbandoned {
		s.mu.Unlock()
		r.keepOnce.Do(func() {
			s.log.Error("Lua state stuck past a call's time limit in code that cannot be interrupted; keeping it, as too many abandoned states still run", "abandoned", n)
		})
		return fmt.Errorf("not finished: the Lua state of source %q is stuck in code that cannot be interrupted, and %d states stuck before it still run; the source's calls fail until one of them returns", s.name, n)
	}
	s.abandoned++
	r.abandon()
	s.mu.Unlock()
	s.opts.Metrics.abandoned.WithLabelValues(s.name).Inc()
	s.opts.Metrics.runaways.WithLabelValues(s.name).Inc()
	s.log.Error("Lua state stuck past a call's time limit in code that cannot be interrupted; abandoning it (its goroutine runs on until that code returns)")
	s.replace(r, "stuck in code that cannot be interrupted")
	return nil
}

// closeWait bounds how long Close waits for each event loop to exit.
const closeWait = 5 * time.Second

// Close stops watching the scripts, fails the calls in flight and releases
// the Lua states.
func (s *Source) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cur = nil
	runners := make([]*runner, 0, len(s.live))
	for r := range s.live {
		runners = append(runners, r)
	}
	s.mu.Unlock()
	close(s.stopWatch)
	<-s.watchDone
	for _, r := range runners {
		r.close()
	}
	var stuck int
	for _, r := range runners {
		select {
		case <-r.exited:
		case <-r.dead:
		case <-time.After(closeWait):
			stuck++
		}
	}
	if stuck > 0 {
		return fmt.Errorf("lua source %q: %d Lua state(s) did not stop within %s", s.name, stuck, closeWait)
	}
	return nil
}
