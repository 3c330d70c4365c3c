package chatcli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/testutil/parleybin"
)

// deadline bounds every wait on a session: output, end.
const deadline = 30 * time.Second

// output collects what a session writes to one stream, and signals each
// write.
type output = parleybin.Output

// chatProc is a session running in the test's process, as "parley chat"
// runs it, whose input the test types.
type chatProc struct {
	t      *testing.T
	stdin  *io.PipeWriter
	stdout *output
	stderr *output
	exited chan struct{} // closed when Run returned
	err    error         // what Run returned, once exited is closed
}

// startChat runs a session with o (its streams and environment the test's)
// and argv, the message if any.
func startChat(t *testing.T, o Options, argv ...string) *chatProc {
	t.Helper()
	in, stdin := io.Pipe()
	p := &chatProc{t: t, stdin: stdin, stdout: parleybin.NewOutput(), stderr: parleybin.NewOutput(), exited: make(chan struct{})}
	o.Stdin, o.Stdout, o.Stderr, o.Prog = in, p.stdout, p.stderr, "parley"
	o.URLGiven, o.TokenGiven = o.URL != "", o.Token != ""
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(p.exited)
		p.err = Run(ctx, o, argv)
	}()
	t.Cleanup(func() {
		cancel()
		stdin.Close()
		<-p.exited
	})
	return p
}

// send types a line.
func (p *chatProc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("type %q: %v", line, err)
	}
}

// waitFor waits until o holds s, failing if the session ends first or the
// deadline passes.
func (p *chatProc) waitFor(o *output, s string) { p.t.Helper(); p.waitCount(o, s, 1) }

// waitCount waits until o holds s n times.
func (p *chatProc) waitCount(o *output, s string, n int) {
	p.t.Helper()
	held, ended := o.Wait(func(text string) bool { return strings.Count(text, s) >= n }, p.exited, deadline)
	switch {
	case held:
	case ended:
		p.t.Fatalf("the session ended without printing %q %d times (%v)\nstdout:\n%s\nstderr:\n%s", s, n, p.err, p.stdout, p.stderr)
	default:
		p.t.Fatalf("the session did not print %q %d times\nstdout:\n%s\nstderr:\n%s", s, n, p.stdout, p.stderr)
	}
}

// wait ends the input and returns what the session ended with.
func (p *chatProc) wait() error {
	p.t.Helper()
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(deadline):
		p.t.Fatalf("the session did not end\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
	}
	return p.err
}
