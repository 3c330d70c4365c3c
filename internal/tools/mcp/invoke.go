package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/tool"
)

// JSON-RPC error codes the SDK uses for its own transport conditions rather
// than for answers of the server: a request the transport could not deliver
// (an HTTP request that failed), and a connection that is closing.
const (
	codeRejected      = -32005
	codeClientClosing = -32003
	codeServerClosing = -32004
)

// InvokeBatch sends the calls as concurrent tools/call requests on the
// session, at most MaxConcurrency in flight, and returns their results in
// call order (see the package documentation for their shape). It fails
// without a session; when the session is lost during the batch, with a
// *tool.PartialError holding the results of the calls that had returned;
// and with ctx's error, promptly, when ctx is done.
func (s *Source) InvokeBatch(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
	sess, reason := s.current()
	if sess == nil {
		return nil, fmt.Errorf("MCP server %q: not connected: %s", s.cfg.Name, reason)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cat := sess.catalog.Load()

	// The batch ends early when ctx is done, the session is lost or the
	// source closes; its calls are then cancelled (the SDK tells the server).
	batch, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-sess.lost:
			cancel(sess.lostErr)
		case <-s.ctx.Done():
			cancel(errSourceClosed)
		case <-batch.Done():
		}
	}()

	var mu sync.Mutex
	results := make([]*tool.Result, len(calls)) // nil until the call has a result
	answer := func(i int, r tool.Result) {
		mu.Lock()
		results[i] = &r
		mu.Unlock()
	}
	slots := make(chan struct{}, s.cfg.MaxConcurrency)
	var wg sync.WaitGroup
launch:
	for i, c := range calls {
		e := cat.byName[c.Name]
		if e == nil {
			answer(i, tool.Errorf("MCP server %q no longer offers tool %q", s.cfg.Name, c.Name))
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-batch.Done():
			break launch
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			// A panic (the SDK's, or in reading its result) is this
			// call's error: the dispatcher's recover does not reach this
			// goroutine, and the process would die with it.
			defer func() {
				if p := recover(); p != nil {
					answer(i, tool.Errorf("MCP server %q: tool %q: internal error: %v", s.cfg.Name, c.Name, p))
				}
			}()
			r, err := s.call(batch, sess, e, c)
			if err != nil {
				cancel(err) // before wg.Done, so the batch's cause is set when done closes
				return
			}
			answer(i, r)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-batch.Done():
		// Return at once: the calls still running end soon, their contexts
		// being done; what they answer from now on is not read.
	}
	mu.Lock()
	got := slices.Clone(results)
	mu.Unlock()
	if !slices.Contains(got, nil) {
		out := make([]tool.Result, len(got))
		for i, r := range got {
			out[i] = *r
		}
		return out, nil // every call answered, even if the batch ended just after
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A call without a result cancelled the batch, with the cause.
	err := fmt.Errorf("MCP server %q: session lost: %w", s.cfg.Name, context.Cause(batch))
	return nil, &tool.PartialError{Err: err, Results: got}
}

// batchMargin is what a batch's bound adds to its calls' timeouts, for
// sending the calls and gathering their results.
const batchMargin = 10 * time.Second

// BatchTimeout returns how long a batch of n calls may take
// (tool.BatchTimeouter): they run MaxConcurrency at a time, each ending
// within CallTimeout, so in at most ceil(n/MaxConcurrency) rounds of
// CallTimeout, plus batchMargin. A batch of slow calls that each keep to
// CallTimeout is never a failure of the source.
func (s *Source) BatchTimeout(n int) time.Duration {
	rounds := max(1, (n+s.cfg.MaxConcurrency-1)/s.cfg.MaxConcurrency)
	return time.Duration(rounds)*s.cfg.CallTimeout + batchMargin
}

// call makes one tools/call. It returns an error when the call has no
// result of its own: the batch was cancelled (its cause), or the session
// failed (call then gives the session up). A response the server sent but
// the SDK could not decode is the call's error result.
func (s *Source) call(batch context.Context, sess *session, e *toolEntry, c tool.Call) (tool.Result, error) {
	ctx, cancel := context.WithTimeout(batch, s.cfg.CallTimeout)
	defer cancel()
	args := c.Args
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	params := &mcp.CallToolParams{Name: e.mcpName, Arguments: args}
	if c.Progress != nil {
		token, stop := s.progress.route(c.Progress)
		defer stop()
		params.SetProgressToken(token)
	}
	start := time.Now()
	res, err := sess.cs.CallTool(ctx, params)
	took := time.Since(start)
	switch {
	case err == nil:
		s.opts.Metrics.callDone(s.cfg.Name, took, res.IsError)
		return toResult(res), nil
	case batch.Err() != nil:
		s.opts.Metrics.callDone(s.cfg.Name, took, true)
		return tool.Result{}, context.Cause(batch)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		s.opts.Metrics.callDone(s.cfg.Name, took, true)
		return tool.Errorf("timed out after %v", s.cfg.CallTimeout), nil
	}
	s.opts.Metrics.callDone(s.cfg.Name, took, true)
	if rpc := serverError(err); rpc != nil {
		if isUndecodable(rpc) { // the server's fault, but the session is sound
			s.log.Warn("mcp server: a tool's result could not be decoded", "tool", c.Name, "err", rpc.Message)
			return tool.Errorf("tool %q failed: the server's result could not be decoded: %s", c.Name, rpc.Message), nil
		}
		return tool.Errorf("tool %q failed: %s (code %d)", c.Name, rpc.Message, rpc.Code), nil
	}
	s.lose(sess, err)
	return tool.Result{}, err
}

// serverError returns the JSON-RPC error with which the server answered a
// call, or nil when err is not such an answer: the connection closed, or the
// request did not get through (over HTTP the SDK marks that with its
// "rejected by transport" code, even when the failed response carried a
// JSON-RPC error, such as a session the server no longer knows).
func serverError(err error) *jsonrpc.Error {
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, &jsonrpc.Error{Code: codeRejected}) {
		return nil
	}
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code == codeClientClosing || rpc.Code == codeServerClosing {
		return nil
	}
	return rpc
}

// progressRoutes passes notifications/progress to the calls that asked for
// them, by progress token.
type progressRoutes struct {
	next   atomic.Uint64
	mu     sync.Mutex
	routes map[string]func(tool.Progress)
}

// route returns a new token whose notifications go to fn, until stop.
func (p *progressRoutes) route(fn func(tool.Progress)) (token string, stop func()) {
	token = "parley-" + strconv.FormatUint(p.next.Add(1), 10)
	p.mu.Lock()
	if p.routes == nil {
		p.routes = map[string]func(tool.Progress){}
	}
	p.routes[token] = fn
	p.mu.Unlock()
	return token, func() {
		p.mu.Lock()
		delete(p.routes, token)
		p.mu.Unlock()
	}
}

// deliver is the client's notifications/progress handler. A notification
// for no call in flight (a late one, or an unknown token) is dropped.
func (p *progressRoutes) deliver(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req.Params == nil {
		return
	}
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	p.mu.Lock()
	fn := p.routes[token]
	p.mu.Unlock()
	if fn != nil {
		fn(tool.Progress{Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
	}
}
