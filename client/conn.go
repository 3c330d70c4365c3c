package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// sseConn keeps one Server-Sent Events route open: it connects, and after a
// dropped connection reconnects with backoff, asking query for the request's
// parameters each time (so a stream resumes from its cursor).
type sseConn struct {
	c      *Client
	ctx    context.Context
	cancel context.CancelFunc
	path   string
	query  func() url.Values

	closeOnce sync.Once
	closed    chan struct{} // closed by shutdown

	body  io.ReadCloser
	rd    *sseReader
	fails int // attempts since an event last arrived
}

// newSSEConn prepares a connection of path; nothing is sent yet.
func newSSEConn(ctx context.Context, c *Client, path string, query func() url.Values) *sseConn {
	ctx, cancel := context.WithCancel(ctx)
	return &sseConn{c: c, ctx: ctx, cancel: cancel, path: path, query: query, closed: make(chan struct{})}
}

// connect makes one attempt. An answer other than 200 is an *APIError.
func (s *sseConn) connect() error {
	req, err := s.c.request(s.ctx, http.MethodGet, s.path, s.query(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := s.c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", s.path, err)
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		return fmt.Errorf("GET %s: %w", s.path, decodeError(res))
	}
	s.body, s.rd = res.Body, newSSEReader(res.Body)
	return nil
}

// reconnect closes the current connection and connects again, waiting
// between failed attempts, until it succeeds, the context ends, or the
// server refuses for good (permanent).
func (s *sseConn) reconnect() error {
	s.close()
	for {
		if s.fails > 0 {
			d := s.c.minDelay << min(s.fails-1, 16)
			if d > s.c.maxDelay || d <= 0 {
				d = s.c.maxDelay
			}
			t := time.NewTimer(d)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return s.ctx.Err()
			case <-t.C:
			}
		}
		s.fails++
		err := s.connect()
		if err == nil {
			return nil
		}
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		if permanent(err) {
			return err
		}
	}
}

// next reads the next event of the current connection.
func (s *sseConn) next() (sseEvent, error) {
	if s.rd == nil {
		return sseEvent{}, io.EOF
	}
	ev, err := s.rd.next()
	if err == nil {
		s.fails = 0
	}
	return ev, err
}

// end closes the connection for good after err and returns the error the
// stream reports: none after shutdown or a clean end.
func (s *sseConn) end(err error) error {
	s.close()
	s.cancel()
	select {
	case <-s.closed:
		return nil
	default:
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// shutdown asks the stream to end; safe from any goroutine. A read blocked
// on the connection fails, and the reader's end returns nil.
func (s *sseConn) shutdown() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.cancel()
	})
}

func (s *sseConn) close() {
	if s.body != nil {
		s.body.Close()
		s.body, s.rd = nil, nil
	}
}

// permanent reports whether a failed connection attempt is not worth
// repeating: the server refused the request itself (a bad token, a deleted
// chat), as opposed to being unreachable, overloaded or failing.
func permanent(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.StatusCode >= 400 && ae.StatusCode < 500 &&
		ae.StatusCode != http.StatusRequestTimeout && ae.StatusCode != http.StatusTooManyRequests
}
