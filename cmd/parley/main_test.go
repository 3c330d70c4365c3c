package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/testutil/parleybin"
)

// These tests build the parley binary once and run it as a real process,
// the way a user does.

// parleyBin is the binary TestMain found or built (with -race when the
// tests run under it), shared with the other packages that start parley.
var parleyBin string

// deadline bounds every wait on the binary: start, exit, output.
const deadline = 30 * time.Second

func TestMain(m *testing.M) {
	bin, err := parleybin.Path()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	parleyBin = bin
	os.Exit(m.Run())
}

// command prepares parley with args, run in dir, with the test's own
// environment minus any PARLEY_* setting, plus env ("KEY=value").
func command(dir string, env []string, args ...string) *exec.Cmd {
	return parleybin.Command(parleyBin, dir, env, args...)
}

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
}

// runParley runs a parley command to completion (within deadline).
func runParley(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := command(dir, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(deadline):
		cmd.Process.Kill()
		<-done
		t.Fatalf("parley %s: did not finish within %s\nstderr:\n%s", strings.Join(args, " "), deadline, stderr.String())
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// server is a running "parley serve" (or another parley process).
type server = parleybin.Process

// output is a process's output, which a test can wait on line by line.
type output = parleybin.Output

// startServe starts "parley serve --listen 127.0.0.1:0 args..." in dir and
// waits until it prints its address. The process is killed at the end of the
// test if it is still running.
func startServe(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	s := launchServe(t, dir, env, args...)
	s.WaitListening()
	return s
}

// launchServe starts "parley serve --listen 127.0.0.1:0 args..." in dir
// without waiting for anything.
func launchServe(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	// Registered first, so it runs last: once the process has ended, the
	// histories it wrote are checked.
	if db := sqlitePath(dir, env, args); db != "" {
		t.Cleanup(func() { parleybin.CheckHistories(t, db) })
	}
	return parleybin.Start(t, command(dir, env, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...), deadline)
}

// sqlitePath is the SQLite database a "parley serve args..." started in dir
// with env uses, or "" when the settings name another database (or a
// configuration file, which may).
func sqlitePath(dir string, env []string, args []string) string {
	dataDir := "parley-data"
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "PARLEY_DATABASE_URL", "PARLEY_CONFIG":
			return ""
		case "PARLEY_DATA_DIR":
			dataDir = v
		}
	}
	for i, a := range args {
		switch {
		case a == "--database" || a == "--config" || strings.HasPrefix(a, "--database=") || strings.HasPrefix(a, "--config="):
			return ""
		case a == "--data-dir" && i+1 < len(args):
			dataDir = args[i+1]
		case strings.HasPrefix(a, "--data-dir="):
			dataDir = strings.TrimPrefix(a, "--data-dir=")
		}
	}
	if !filepath.IsAbs(dataDir) {
		dataDir = filepath.Join(dir, dataDir)
	}
	return filepath.Join(dataDir, "parley.db")
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
