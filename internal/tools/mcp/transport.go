package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// transport returns a fresh transport for one connection attempt, and the
// stdio server's stderr log (nil over HTTP). What the server sends passes
// through resps's filter.
func (s *Source) transport(resps *responses) (mcp.Transport, *stderrLog, error) {
	if s.opts.transport != nil {
		t, err := s.opts.transport()
		return t, nil, err
	}
	if s.cfg.URL != "" {
		ht := newHeaderTransport(s.cfg.Headers, s.cfg.BearerToken)
		return &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: &http.Client{Transport: &filterTransport{base: ht, resps: resps}},
		}, nil, nil
	}
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
	cmd.Dir = s.cfg.Dir
	cmd.Env = []string{} // exactly Config.Env: parley's own secrets stay out of the child
	for _, k := range slices.Sorted(maps.Keys(s.cfg.Env)) {
		cmd.Env = append(cmd.Env, k+"="+s.cfg.Env[k])
	}
	stderr := &stderrLog{log: s.log}
	cmd.Stderr = stderr
	// Once the child has exited, stop waiting for its stderr after a while:
	// a grandchild may hold it open.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = childProcAttr()
	return &commandTransport{cmd: cmd, terminate: s.opts.terminate, resps: resps, log: s.log}, stderr, nil
}

// commandTransport runs a stdio server as mcp.CommandTransport does, with
// its stdout read through resps's stdout filter, which logs to log.
type commandTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration
	resps     *responses
	log       *slog.Logger
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	return (&mcp.IOTransport{
		// The connection closes by closing stdin, not stdout.
		Reader: io.NopCloser(t.resps.stdout(stdout, t.log)),
		Writer: &childStdin{WriteCloser: stdin, cmd: t.cmd, terminate: t.terminate, resps: t.resps},
	}).Connect(ctx)
}

// childStdin is a stdio server's stdin. The SDK writes one message a
// Write; resps notes each. Closing it stops the server: it closes stdin and
// waits terminate for the server to exit, then sends SIGTERM to the
// server's process group and waits as long again, then kills the group.
// Once the server has exited, whatever is left of its group (a grandchild
// it did not stop) is killed.
type childStdin struct {
	io.WriteCloser
	cmd       *exec.Cmd
	terminate time.Duration
	resps     *responses
}

func (c *childStdin) Write(p []byte) (int, error) {
	c.resps.sent(p)
	return c.WriteCloser.Write(p)
}

func (c *childStdin) Close() error {
	if err := c.WriteCloser.Close(); err != nil {
		return fmt.Errorf("close stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	wait := func() (error, bool) {
		timer := time.NewTimer(c.terminate)
		defer timer.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-timer.C:
			return nil, false
		}
	}
	err, ok := wait()
	if !ok && signalGroup(c.cmd.Process, syscall.SIGTERM) == nil {
		err, ok = wait()
	}
	if !ok {
		if err := signalGroup(c.cmd.Process, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill the server: %w", err)
		}
		if err, ok = wait(); !ok {
			return errors.New("the server did not exit after SIGKILL")
		}
	}
	// While a member of the group runs, the group keeps the leader's id
	// and no new process gets it: this reaches only what the server left.
	_ = signalGroup(c.cmd.Process, syscall.SIGKILL)
	return err
}

// filterTransport shows resps the messages the client posts, and passes a
// successful response's body, a JSON message or an event stream, through
// resps's filter.
type filterTransport struct {
	base  http.RoundTripper
	resps *responses
}

func (t *filterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.GetBody != nil { // the SDK posts its messages from memory
		if body, err := req.GetBody(); err == nil {
			data, err := io.ReadAll(body)
			if err == nil {
				t.resps.sent(data)
			}
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, err
	}
	var body io.Reader
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt {
	case "application/json":
		body = t.resps.filter(resp.Body, "", 0)
	case "text/event-stream":
		body = t.resps.filter(resp.Body, "data:", '\n')
	default:
		return resp, nil
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{body, resp.Body}
	return resp, nil
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func newHeaderTransport(headers map[string]string, bearer string) http.RoundTripper {
	h := http.Header{}
	for k, v := range headers {
		h.Set(k, v)
	}
	if bearer != "" {
		h.Set("Authorization", "Bearer "+bearer)
	}
	return &headerTransport{base: http.DefaultTransport, header: h}
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) == 0 {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	for k, v := range t.header {
		req.Header[k] = v
	}
	return t.base.RoundTrip(req)
}

// stderrLines is how many of a stdio server's last stderr lines are kept
// for error messages.
const stderrLines = 5

// stderrLog receives a stdio server's stderr: every line is logged at debug
// level, and the last few are kept to explain a failed start or a crash.
type stderrLog struct {
	log *slog.Logger

	mu      sync.Mutex
	partial []byte   // the unfinished last line
	last    []string // the last complete lines, oldest first
}

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(string(bytes.TrimRight(l.partial[:i], "\r")))
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 4096 { // a line without end: log what came so far
		l.line(string(l.partial))
		l.partial = nil
	}
	return len(p), nil
}

// line logs one line and keeps it. l.mu must be held.
func (l *stderrLog) line(s string) {
	if strings.TrimSpace(s) == "" {
		return
	}
	l.log.Debug("mcp server stderr", "line", s)
	if len(l.last) == stderrLines {
		l.last = l.last[1:]
	}
	l.last = append(l.last, s)
}

// tail returns the last lines, joined with " | "; "" for a nil log.
func (l *stderrLog) tail() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.last
	if len(l.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(l.partial))
	}
	return strings.Join(lines, " | ")
}
