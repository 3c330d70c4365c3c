package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/tool"
)

// session is one connection to the server, from a successful connect until
// it is lost or the source closes.
type session struct {
	cs      *mcp.ClientSession
	stderr  *stderrLog // a stdio server's stderr, nil over HTTP
	catalog atomic.Pointer[catalog]

	changed chan struct{} // holds a token when the tool list changed

	lostOnce sync.Once
	lost     chan struct{} // closed when the session is given up
	lostErr  error         // why, set before lost is closed
}

func newSession(cs *mcp.ClientSession, stderr *stderrLog) *session {
	return &session{cs: cs, stderr: stderr, changed: make(chan struct{}, 1), lost: make(chan struct{})}
}

// fail gives the session up with err; the first reason sticks.
func (ss *session) fail(err error) {
	ss.lostOnce.Do(func() {
		ss.lostErr = err
		close(ss.lost)
	})
}

// run is the connection loop: connect, serve the session until it is lost,
// wait, connect again, until the source closes.
func (s *Source) run() {
	defer close(s.loopDone)
	first := true
	// firstEnded ends WaitConnected's wait, once the state it reports is
	// in place.
	firstEnded := func(err error) {
		if first {
			first = false
			s.firstErr = err
			close(s.firstDone)
		}
	}
	defer firstEnded(errSourceClosed)
	failures := 0    // failed attempts and short-lived sessions in a row
	lastLogged := "" // the last connect error logged at warn level
	for {
		if !s.sleep(s.backoff(failures)) {
			return
		}
		sess, err := s.connect(first)
		if s.ctx.Err() != nil {
			if sess != nil {
				_ = s.drop(sess)
			}
			return
		}
		if err != nil {
			failures++
			s.setStatus(tool.StateFailed, err)
			firstEnded(err)
			if msg := err.Error(); msg != lastLogged {
				lastLogged = msg
				s.log.Warn("mcp server: connect failed; retrying", "err", err, "attempt", failures)
			} else {
				s.log.Debug("mcp server: connect failed again", "err", err, "attempt", failures)
			}
			continue
		}
		lastLogged = ""
		connected := time.Now()
		s.install(sess)
		firstEnded(nil)
		res := sess.cs.InitializeResult()
		s.log.Info("mcp server connected", "tools", len(sess.catalog.Load().decls),
			"protocol", res.ProtocolVersion, "server", serverName(res))

		lostErr := s.serve(sess)
		closeErr := s.drop(sess)
		if s.ctx.Err() != nil {
			return
		}
		s.setStatus(tool.StateConnecting, lostErr)
		attrs := []any{"err", lostErr}
		if closeErr != nil { // a stdio server's exit status, say
			attrs = append(attrs, "close", closeErr)
		}
		if tail := sess.stderr.tail(); tail != "" {
			attrs = append(attrs, "stderr", tail)
		}
		s.log.Warn("mcp server disconnected; reconnecting", attrs...)
		// A session that lasted reconnects at once; one that was lost soon
		// after it began counts as a failure, so a server that crashes at
		// every start is not restarted in a tight loop.
		if time.Since(connected) >= s.opts.MaxBackoff {
			failures = 0
		} else {
			failures++
		}
	}
}

func serverName(res *mcp.InitializeResult) string {
	if res == nil || res.ServerInfo == nil {
		return ""
	}
	return res.ServerInfo.Name + " " + res.ServerInfo.Version
}

// connect makes one connection attempt, bounded by ConnectTimeout: start the
// transport, initialize, list the tools. The first attempt of a stdio server
// is bounded by FirstConnectTimeout instead, and says in the log when it
// takes longer than ConnectTimeout.
func (s *Source) connect(first bool) (*session, error) {
	timeout := s.connectTimeout(first)
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	if timeout > s.cfg.ConnectTimeout {
		waiting := time.AfterFunc(s.cfg.ConnectTimeout, func() {
			s.log.Info("mcp server: waiting for the command to start (a first start may download a package)",
				"waited", s.cfg.ConnectTimeout, "up_to", timeout)
		})
		defer waiting.Stop()
	}
	resps := newResponses()
	t, stderr, err := s.transport(resps)
	if err != nil {
		return nil, err
	}
	// Keep the connection the SDK opens, to close it if Connect fails part
	// way: not every failure path of Connect closes it (a stdio child would
	// be left running).
	kept := &keepConn{Transport: t}
	cs, err := s.client.Connect(ctx, kept, nil)
	if err != nil {
		if kept.conn != nil {
			_ = kept.conn.Close()
		}
		return nil, s.connectError(err, ctx, timeout, stderr)
	}
	sess := newSession(cs, stderr)
	s.mu.Lock()
	s.live[cs] = sess // from now on a list_changed reaches sess.changed
	s.mu.Unlock()
	cat, err := s.listTools(ctx, sess)
	if err != nil {
		_ = s.drop(sess)
		return nil, s.connectError(fmt.Errorf("list tools: %w", err), ctx, timeout, stderr)
	}
	sess.catalog.Store(cat)
	return sess, nil
}

// connectTimeout is the time one connection attempt is given.
func (s *Source) connectTimeout(first bool) time.Duration {
	if first && len(s.cfg.Command) > 0 {
		return s.cfg.FirstConnectTimeout
	}
	return s.cfg.ConnectTimeout
}

// connectError names a failed attempt's cause, in the caller's terms when
// it ran out of time.
func (s *Source) connectError(err error, ctx context.Context, timeout time.Duration, stderr *stderrLog) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v: %w", timeout, err)
	}
	if tail := stderr.tail(); tail != "" {
		err = fmt.Errorf("%w (stderr: %s)", err, tail)
	}
	return err
}

// keepConn is a transport that remembers the connection it opened.
type keepConn struct {
	mcp.Transport
	conn mcp.Connection
}

func (k *keepConn) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := k.Transport.Connect(ctx)
	k.conn = conn
	return conn, err
}

// listTools lists all the server's tools, page by page.
func (s *Source) listTools(ctx context.Context, sess *session) (*catalog, error) {
	var tools []*mcp.Tool
	for t, err := range sess.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return buildCatalog(s.cfg.Name, tools, s.cfg.Allow, s.cfg.Deny, s.log), nil
}

// lose gives sess up after a failure seen outside the connection loop: its
// tools are gone at once, and the loop reconnects.
func (s *Source) lose(sess *session, err error) {
	sess.fail(err)
	s.mu.Lock()
	current := s.sess == sess
	if current {
		s.sess = nil
	}
	s.mu.Unlock()
	if current {
		s.setStatus(tool.StateConnecting, err)
	}
}

// install makes sess the ready session.
func (s *Source) install(sess *session) {
	s.mu.Lock()
	s.sess = sess
	s.mu.Unlock()
	s.setStatus(tool.StateReady, nil)
}

// drop closes sess and forgets it; calls in flight on it fail first, since
// the SDK's close waits for them. It returns the error of the close.
func (s *Source) drop(sess *session) error {
	sess.fail(errSourceClosed)
	s.mu.Lock()
	if s.sess == sess {
		s.sess = nil
	}
	delete(s.live, sess.cs)
	s.mu.Unlock()
	return sess.cs.Close()
}

var errSourceClosed = errors.New("the MCP source is closed")

// serve waits until sess is lost, re-listing the tools whenever the server
// says they changed, and returns why it was lost (nil when the source
// closed).
func (s *Source) serve(sess *session) error {
	go func() {
		err := sess.cs.Wait()
		if err == nil {
			err = errors.New("the server closed the connection")
		} else {
			err = fmt.Errorf("the connection broke: %w", err)
		}
		sess.fail(err)
	}()
	for {
		select {
		case <-s.ctx.Done():
			return nil
		case <-sess.lost:
			return sess.lostErr
		case <-sess.changed:
			s.relist(sess)
		}
	}
}

// relist replaces sess's tools with a new listing; on error the old list
// stays.
func (s *Source) relist(sess *session) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ConnectTimeout)
	defer cancel()
	go func() {
		select {
		case <-sess.lost:
			cancel()
		case <-ctx.Done():
		}
	}()
	cat, err := s.listTools(ctx, sess)
	if err != nil {
		s.log.Warn("mcp server: listing the changed tools failed; keeping the previous list", "err", err)
		return
	}
	sess.catalog.Store(cat)
	s.log.Info("mcp server: tool list changed", "tools", len(cat.decls))
}

// onToolListChanged handles notifications/tools/list_changed: the session's
// loop lists the tools again.
func (s *Source) onToolListChanged(_ context.Context, req *mcp.ToolListChangedRequest) {
	s.mu.Lock()
	sess := s.live[req.Session]
	s.mu.Unlock()
	if sess == nil {
		return
	}
	select {
	case sess.changed <- struct{}{}:
	default: // a listing is already due
	}
}
