// Package mcp makes an MCP (Model Context Protocol) server a parley tool
// source. A Source keeps one session with its server, over stdio (a child
// process) or streamable HTTP, and re-establishes it in the background with
// jittered exponential backoff whenever it is lost, for as long as the
// source is open.
//
// # Tools
//
// On connecting, the source lists the server's tools and caches them; Tools
// answers from that cache, so it is cheap, and is empty while there is no
// session. A notifications/tools/list_changed from the server makes the
// source list them again in the background. Config.Allow and Config.Deny
// (path.Match globs over the MCP tool names) choose which tools are offered.
// The model sees a tool as "<server>_<tool>", every character outside
// [a-zA-Z0-9_-] replaced by "_"; a name longer than 64 characters, or one
// that would clash with another tool of the server, is cut and ends in "_"
// and 8 hex digits of the SHA-256 of the MCP tool name, so an MCP tool keeps
// its name from one listing to the next.
//
// # Calls
//
// The calls of one step go to the server as concurrent tools/call requests
// on the one session, at most Config.MaxConcurrency at a time, each bounded
// by Config.CallTimeout. What the model gets from a call is, when the MCP
// result is a single text block without structured content, that text as a
// JSON string; otherwise the object
//
//	{"content": [<block>, ...], "structured": <structuredContent>}
//
// where "structured" is left out when the server sent none, and each block
// is one of these, with empty fields left out:
//
//	{"type": "text", "text": "..."}
//	{"type": "image", "mime_type": "image/png", "data": "<base64>"}
//	{"type": "audio", "mime_type": "audio/wav", "data": "<base64>"}
//	{"type": "resource_link", "uri": "...", "name": "...", "title": "...", "description": "...", "mime_type": "..."}
//	{"type": "resource", "uri": "...", "mime_type": "...", "text": "..."}
//	{"type": "resource", "uri": "...", "mime_type": "...", "blob": "<base64>"}
//
// A result the server marks isError is an error result of the same shape. A
// JSON-RPC error answering the call (an unknown tool, invalid parameters) is
// the error result "tool "<name>" failed: <message> (code <code>)"; a
// response the SDK cannot decode (a text that is not a string, a content
// type MCP does not have, JSON nested deeper than the SDK's 1000 levels) the
// error result "tool "<name>" failed: the server's result could not be
// decoded: <why>", the session kept; and a call past its timeout the error
// result "timed out after <timeout>". A call
// whose tool.Call.Progress is set is sent with a progress token, and the
// server's notifications/progress for it go to Call.Progress; a report that
// arrives after the call's result is dropped.
//
// Losing the session during a batch (the connection closed, the process
// exited, an HTTP request that did not get through) fails the batch:
// InvokeBatch returns a *tool.PartialError naming what happened, with the
// results of the calls that had returned, and the session is re-established
// in the background (a stdio server is started again). A
// cancelled context makes InvokeBatch return at once; the calls in flight are
// cancelled on the server with notifications/cancelled. Under the stateless
// protocol over HTTP (2026-07-28) that notification travels in a request of
// its own, and what cancels a call is the end of its HTTP request: whether
// the server's tool notices is up to the server.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/tool"
)

// Config is one configured MCP server; values from the environment are
// already resolved by the caller. A zero numeric field takes its default.
type Config struct {
	Name string // the server's configured name, prefix of its tools' names

	// Exactly one of Command and URL is set.
	Command []string          // stdio: program and arguments
	Env     map[string]string // stdio: the child's whole environment (nothing of parley's is passed unless here)
	Dir     string            // stdio: working directory ("" = parley's)

	URL         string            // streamable HTTP endpoint
	Headers     map[string]string // HTTP: header name -> value, sent with every request
	BearerToken string            // HTTP: sent as "Authorization: Bearer <token>"

	// Allow and Deny are globs (path.Match syntax) over the MCP tool names:
	// an empty Allow offers every tool; Deny wins over Allow.
	Allow, Deny []string

	MaxConcurrency int           // calls of one batch in flight at once (default 32)
	CallTimeout    time.Duration // one tools/call (default 60s)
	ConnectTimeout time.Duration // one connection attempt, initialize and tools/list included (default 10s)

	// FirstConnectTimeout bounds, instead of ConnectTimeout, the first
	// connection attempt of a stdio server: its command may first have to
	// fetch a package (npx, uvx), and killing it part way would leave a
	// half-installed cache behind (default 5m).
	FirstConnectTimeout time.Duration
}

// Defaults of Config and Options.
const (
	DefaultMaxConcurrency = 32
	DefaultCallTimeout    = 60 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	// DefaultFirstConnectTimeout leaves a first start the time a package
	// download takes.
	DefaultFirstConnectTimeout = 5 * time.Minute
	DefaultMinBackoff          = 500 * time.Millisecond
	DefaultMaxBackoff          = 30 * time.Second
)

// terminateDuration is how long closing a stdio session waits for the child
// to exit after its stdin is closed, and again after SIGTERM, before
// SIGKILL.
const terminateDuration = 2 * time.Second

// Validate reports what is wrong with a configuration, if anything.
func (c Config) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("the name is empty"))
	}
	switch {
	case len(c.Command) == 0 && c.URL == "":
		errs = append(errs, errors.New("neither a command nor a URL is set"))
	case len(c.Command) > 0 && c.URL != "":
		errs = append(errs, errors.New("both a command and a URL are set"))
	case len(c.Command) > 0 && c.Command[0] == "":
		errs = append(errs, errors.New("the command's program is empty"))
	}
	for _, p := range slices.Concat(c.Allow, c.Deny) {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("tool pattern %q: %w", p, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("MCP server %q: %w", c.Name, err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxConcurrency <= 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.FirstConnectTimeout <= 0 {
		c.FirstConnectTimeout = DefaultFirstConnectTimeout
	}
	// A first attempt is never given less time than any other.
	c.FirstConnectTimeout = max(c.FirstConnectTimeout, c.ConnectTimeout)
	return c
}

// Options configure a source; a zero field takes its default.
type Options struct {
	Logger  *slog.Logger // default: discard
	Metrics *Metrics     // default: none

	// MinBackoff and MaxBackoff bound the wait between connection attempts
	// (defaults 500ms and 30s); it doubles from one failed attempt to the
	// next, each wait drawn at random from its upper half.
	MinBackoff, MaxBackoff time.Duration

	// transport, when set, replaces the configured transport (for tests).
	transport func() (mcp.Transport, error)
	// terminate, when set, replaces terminateDuration (for tests).
	terminate time.Duration
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.terminate <= 0 {
		o.terminate = terminateDuration
	}
	return o
}

// Source is an MCP server as a tool source (tool.Source and
// tool.StatusReporter). It is safe for concurrent use.
type Source struct {
	cfg    Config
	opts   Options
	log    *slog.Logger
	client *mcp.Client

	ctx      context.Context // the source's life: done once Close is called
	stop     context.CancelFunc
	loopDone chan struct{} // closed when the connection loop has ended

	firstDone chan struct{} // closed when the first connection attempt has ended
	firstErr  error         // its error, set before firstDone is closed

	mu     sync.Mutex
	sess   *session                        // the ready session, nil when there is none
	live   map[*mcp.ClientSession]*session // sessions connected, ready or not yet
	status tool.Status

	progress progressRoutes
}

// Open returns a source for the configured server at once and connects to
// it in the background; WaitConnected waits for the first attempt. An
// invalid configuration (see Config.Validate) leaves the source failed for
// good, with that error.
func Open(cfg Config, opts Options) *Source {
	opts = opts.withDefaults()
	ctx, stop := context.WithCancel(context.Background())
	s := &Source{
		cfg:       cfg.withDefaults(),
		opts:      opts,
		log:       opts.Logger.With("mcp_server", cfg.Name),
		ctx:       ctx,
		stop:      stop,
		loopDone:  make(chan struct{}),
		firstDone: make(chan struct{}),
		live:      map[*mcp.ClientSession]*session{},
	}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "parley", Version: "1"}, &mcp.ClientOptions{
		Logger:                      s.log,
		Capabilities:                &mcp.ClientCapabilities{}, // no roots, sampling or elicitation
		ToolListChangedHandler:      s.onToolListChanged,
		ProgressNotificationHandler: s.progress.deliver,
	})
	s.setStatus(tool.StateConnecting, nil)
	if err := cfg.Validate(); err != nil {
		s.firstErr = err
		close(s.firstDone)
		s.setStatus(tool.StateFailed, err)
		s.log.Error("mcp server not started", "err", err)
		close(s.loopDone)
		return s
	}
	go s.run()
	return s
}

// Name returns the server's configured name.
func (s *Source) Name() string { return s.cfg.Name }

// Tools returns the server's tools as of the last listing, each with the
// server's annotations of it, or none while there is no session. It never
// fails.
func (s *Source) Tools(context.Context) ([]tool.Decl, error) {
	return slices.Clone(s.catalog().decls), nil
}

// Annotations returns the MCP annotations (readOnlyHint, destructiveHint,
// idempotentHint, openWorldHint) of the tool the model knows as name, and
// whether the tool is offered now. The annotations are nil when the server
// gave none; they are the server's claims, not guarantees.
func (s *Source) Annotations(name string) (*mcp.ToolAnnotations, bool) {
	e, ok := s.catalog().byName[name]
	if !ok || e.annotations == nil {
		return nil, ok
	}
	a := *e.annotations
	return &a, true
}

// Status reports whether the server's tools can be called: connecting
// before the first connection and after a session was lost, ready, or
// failed when the last attempt failed (another follows). Unless ready, it
// carries the last error.
func (s *Source) Status() tool.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// WaitConnected waits until the first connection attempt has ended and
// returns its error (nil when it connected), or ctx's error.
func (s *Source) WaitConnected(ctx context.Context) error {
	select {
	case <-s.firstDone:
		return s.firstErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops reconnecting and closes the session; calls in flight fail. A
// stdio server has its stdin closed and, if it does not exit within 2s, its
// process group is sent SIGTERM and then SIGKILL, so Close returns within a
// few seconds; what the server left running in its group is killed.
func (s *Source) Close() error {
	s.stop()
	<-s.loopDone
	s.setStatus(tool.StateFailed, errSourceClosed)
	return nil
}

// catalog returns the ready session's tools, or none.
func (s *Source) catalog() *catalog {
	s.mu.Lock()
	sess := s.sess
	s.mu.Unlock()
	if sess == nil {
		return emptyCatalog
	}
	return sess.catalog.Load()
}

// current returns the ready session, or nil and the reason there is none.
func (s *Source) current() (*session, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil {
		reason := s.status.Error
		if reason == "" {
			reason = "no session yet"
		}
		return nil, reason
	}
	return s.sess, ""
}

func (s *Source) setStatus(state string, err error) {
	s.mu.Lock()
	s.status = tool.Status{State: state}
	if err != nil {
		s.status.Error = err.Error()
	}
	s.mu.Unlock()
	s.opts.Metrics.setState(s.cfg.Name, state)
}

// backoff returns the wait before the attempt that follows n failures in a
// row: MinBackoff doubled n-1 times, capped at MaxBackoff, drawn at random
// from its upper half so that many sources do not retry in step.
func (s *Source) backoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := s.opts.MinBackoff
	for i := 1; i < n && d < s.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.opts.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// sleep waits d, or until the source is closed; it reports whether the
// source is still open.
func (s *Source) sleep(d time.Duration) bool {
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}
