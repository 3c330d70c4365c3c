package mcp

import (
	"bytes"
	"log/slog"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// transport returns a fresh transport for one connection attempt, and the
// stdio server's stderr log (nil over HTTP).
func (s *Source) transport() (mcp.Transport, *stderrLog, error) {
	if s.opts.transport != nil {
		t, err := s.opts.transport()
		return t, nil, err
	}
	if s.cfg.URL != "" {
		return &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: &http.Client{Transport: newHeaderTransport(s.cfg.Headers, s.cfg.BearerToken)},
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
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: s.opts.terminate}, stderr, nil
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
