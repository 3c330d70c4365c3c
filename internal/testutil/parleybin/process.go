package parleybin

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Command prepares the parley binary bin with args, run in dir, with the
// test's environment minus any PARLEY_* setting, plus env ("KEY=value"),
// as a user's shell would start it.
func Command(bin, dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PARLEY_") && !strings.HasPrefix(kv, "GORACE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// A -race binary otherwise sleeps 1 s before exiting; a race it finds
	// still makes it exit 66, which fails the test.
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// Output collects a process's output and signals each write, so a test can
// wait for a line without polling.
type Output struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // a token after each write
}

// NewOutput returns an empty Output, to be a process's Stdout or Stderr.
func NewOutput() *Output { return &Output{changed: make(chan struct{}, 1)} }

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
	return o.b.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Line returns the first complete line that starts with prefix.
func (o *Output) Line(prefix string) (string, bool) {
	for l := range strings.Lines(o.String()) {
		if strings.HasPrefix(l, prefix) && strings.HasSuffix(l, "\n") {
			return strings.TrimSuffix(l, "\n"), true
		}
	}
	return "", false
}

// WaitLine waits for a line starting with prefix until the process ends
// (exited closes) or timeout passes.
func (o *Output) WaitLine(prefix string, exited <-chan struct{}, timeout time.Duration) (string, bool) {
	o.Wait(func(string) bool { _, ok := o.Line(prefix); return ok }, exited, timeout)
	return o.Line(prefix)
}

// Wait waits until ok holds of the output so far, the process ends
// (exited closes) or timeout passes, and reports whether ok held, and
// whether the process had ended when Wait gave up.
func (o *Output) Wait(ok func(text string) bool, exited <-chan struct{}, timeout time.Duration) (held, ended bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		if ok(o.String()) {
			return true, false
		}
		select {
		case <-o.changed:
		case <-exited:
			return ok(o.String()), true
		case <-timer.C:
			return false, false
		}
	}
}

// Process is a parley process a test started, its output recorded.
type Process struct {
	t       testing.TB
	timeout time.Duration // bounds every wait on it
	Cmd     *exec.Cmd
	URL     string // http://ADDR from "parley listening on http://ADDR", once WaitListening saw it
	Token   string // the admin token, if this start printed one
	Stdout  *Output
	Stderr  *Output
	Exited  chan struct{} // closed when the process has ended
}

// Start starts cmd with its output recorded; Exited closes when it ends.
// It is killed at the end of the test if it is still running. timeout
// bounds every wait on it.
func Start(t testing.TB, cmd *exec.Cmd, timeout time.Duration) *Process {
	t.Helper()
	p := &Process{t: t, timeout: timeout, Cmd: cmd, Stdout: NewOutput(), Stderr: NewOutput(), Exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(p.Exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.Exited:
		default:
			cmd.Process.Kill()
			<-p.Exited
		}
	})
	return p
}

// WaitListening waits until a "parley serve" prints its address, which
// becomes URL, and takes the admin token it printed, if any, as Token. It
// fails the test if the process ends first or the timeout passes.
func (p *Process) WaitListening() {
	p.t.Helper()
	l, ok := p.Stdout.WaitLine("parley listening on http://", p.Exited, p.timeout)
	if !ok {
		p.t.Fatalf("serve printed no address\nstdout:\n%s\nstderr:\n%s", p.Stdout, p.Stderr)
	}
	p.URL = strings.TrimPrefix(l, "parley listening on ")
	if l, ok := p.Stdout.Line("admin token: "); ok {
		p.Token = strings.TrimPrefix(l, "admin token: ")
	}
}

// Stop sends SIGTERM and waits for the process to end, returning its exit
// code.
func (p *Process) Stop() int {
	p.t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM: %v", err)
	}
	return p.Wait()
}

// Wait waits for the process to end and returns its exit code.
func (p *Process) Wait() int {
	p.t.Helper()
	select {
	case <-p.Exited:
	case <-time.After(p.timeout):
		p.t.Fatalf("%s did not exit within %s\nstderr:\n%s", filepath.Base(p.Cmd.Path), p.timeout, p.Stderr)
	}
	return p.Cmd.ProcessState.ExitCode()
}
