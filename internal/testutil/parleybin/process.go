package parleybin

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
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
