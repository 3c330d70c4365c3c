// Package browsertest drives the web UI in headless Chromium against a
// real "parley serve" (the binary parleybin builds once for every package),
// whose only model is an OpenAI-compatible fake. The tests need
// PARLEY_TEST_CHROMIUM (the browser's path); without it they are skipped
// (in CI they fail).
package browsertest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/testutil/parleybin"
)

// parleyBin is the binary TestMain found or built (with -race when the
// tests run under it), shared with the other packages that start parley.
var parleyBin string

// deadline bounds every wait on the binary: start, exit, output.
const deadline = 30 * time.Second

func TestMain(m *testing.M) {
	code := run(m)
	os.Exit(code)
}

func run(m *testing.M) int {
	// Only the browser tests need the binary: without a browser they skip.
	if os.Getenv("PARLEY_TEST_CHROMIUM") != "" {
		bin, err := parleybin.Path()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		parleyBin = bin
	}
	defer stopChromium()
	code := m.Run()
	if !stopShared() && code == 0 {
		code = 1
	}
	return code
}

// command prepares parley with args, run in dir, with the test's own
// environment minus any PARLEY_* setting, plus env ("KEY=value").
func command(dir string, env []string, args ...string) *exec.Cmd {
	return parleybin.Command(parleyBin, dir, env, args...)
}

// server is a running "parley serve".
type server = parleybin.Process

// output is a process's output, which a test can wait on line by line.
type output = parleybin.Output

// startServe starts "parley serve --listen 127.0.0.1:0 args..." in dir and
// waits until it prints its address. The process is killed at the end of
// the test if it is still running.
func startServe(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	s := parleybin.Start(t, command(dir, env, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...), deadline)
	s.WaitListening()
	return s
}

// get sends GET url with the bearer token (none if "") and returns the
// status and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	return do(t, http.MethodGet, url, token, "")
}

// do sends a request with an optional JSON body and returns status and body.
func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	return parleybin.Do(t, method, url, token, body, deadline)
}
