// Package mcptest finds the MCP servers the tests talk to that nobody on
// the team wrote.
package mcptest

import (
	"fmt"
	"os"
	"testing"
)

// EverythingEnv names the mcp-server-everything executable: the reference
// server the MCP project publishes on npm (@modelcontextprotocol/server-everything).
// .ci/run installs it and sets the variable.
const EverythingEnv = "PARLEY_TEST_MCP_EVERYTHING"

// Everything returns the reference server's executable. Without one the
// test is skipped with a notice on stderr, where a plain go test run shows
// it, or fails when CI=true: CI must run these tests.
func Everything(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(EverythingEnv)
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not set: CI must run the MCP reference server tests", EverythingEnv)
		}
		fmt.Fprintf(os.Stderr, "NOTICE: %s not set: skipping %s (.ci/run installs the server with npm)\n", EverythingEnv, t.Name())
		t.Skipf("%s not set", EverythingEnv)
	}
	return bin
}
