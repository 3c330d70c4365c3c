// Package mcptest finds the MCP servers the tests talk to that nobody on
// the team wrote.
package mcptest

import (
	"fmt"
	"github.com/parleyhq/parley/internal/testutil/notice"
	"os"
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
	bin := os.Getenv(EverythingEnv)
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not set: CI must run the MCP reference server tests", EverythingEnv)
		}
		notice.Once(EverythingEnv, fmt.Sprintf("%s is not set: the MCP reference server tests are skipped (.ci/run installs the server with npm)", EverythingEnv))
		t.Skipf("%s not set", EverythingEnv)
	}
	return bin
}
