// Package mcptest finds the MCP servers the tests talk to that nobody on
// the team wrote.
package mcptest

import (
	"github.com/parleyhq/parley/internal/testutil/notice"
	"testing"
)

// EverythingEnv names the mcp-server-everything executable: the reference
// server the MCP project publishes on npm (@modelcontextprotocol/server-everything).
// .ci/run installs it and sets the variable.
const EverythingEnv = "PARLEY_TEST_MCP_EVERYTHING"

// Everything returns the reference server's executable. Without one the
// test is skipped with a notice on the terminal, or fails when CI=true: CI
// must run these tests.
func Everything(t testing.TB) string {
	t.Helper()
	return notice.Env(t, EverythingEnv, "the MCP reference server tests are skipped (.ci/run installs the server with npm)")
}
