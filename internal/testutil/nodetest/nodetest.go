// Package nodetest runs Node scripts that drive parley with npm packages
// nobody on the team wrote (the official openai client), so go test runs
// them.
package nodetest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/testutil/notice"
)

// ModulesEnv names the node_modules directory the scripts load their
// packages from. .ci/run installs the packages with npm, at pinned
// versions, and sets the variable.
const ModulesEnv = "PARLEY_TEST_NODE_MODULES"

// Timeout bounds one run of a script.
const Timeout = 60 * time.Second

// Modules returns the node_modules directory. Without one the test is
// skipped with a notice on the terminal, or fails when CI=true: CI must run
// these tests.
func Modules(t testing.TB) string {
	t.Helper()
	dir := notice.Env(t, ModulesEnv, "the Node client tests are skipped (.ci/run installs the packages with npm)")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("%s=%s is not a directory: %v", ModulesEnv, dir, err)
	}
	return dir
}

// Run runs `node script` with env added to the test's environment and
// returns its stdout; a non-zero exit, or one past Timeout, fails the test
// with node's stderr.
//
// The packages are found through NODE_PATH, which only CommonJS require
// reads (ESM import ignores it), so script must be CommonJS: a .cjs file
// that loads its packages with require. That needs no copy of the script
// and no node_modules symlink beside it.
func Run(t testing.TB, script string, env map[string]string) string {
	t.Helper()
	modules := Modules(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("%s is set but node is not on PATH: %v", ModulesEnv, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second // a child of node's that keeps the pipes open does not hang the test
	err = cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("node %s did not finish in %s\nstdout:\n%s\nstderr:\n%s", script, Timeout, stdout.String(), stderr.String())
	}
	if err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
