// Package notice tells the person running the tests what they skip.
//
// go test shows nothing of a passing package but its "ok" line, so a skip
// reason or a line on stderr never reaches someone who runs plain
// `go test ./...`. A notice goes to the terminal instead (/dev/tty), where
// that person sees it, once per test binary and key; without a terminal
// (CI, an IDE) it goes to stderr, which -v shows.
package notice

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

var (
	mu   sync.Mutex
	seen = map[string]bool{}
)

// Once prints msg, prefixed "NOTICE: ", the first time key is given.
func Once(key, msg string) {
	mu.Lock()
	defer mu.Unlock()
	if seen[key] {
		return
	}
	seen[key] = true
	line := "NOTICE: " + msg + "\n"
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if _, err := fmt.Fprint(tty, line); err == nil {
			return
		}
	}
	fmt.Fprint(os.Stderr, line)
}

// Env returns the environment variable name, which names something a test
// needs from outside (a database, a program). When it is not set, the test
// fails if CI=true (CI must run every test), and is skipped otherwise, with
// the notice skipped (once per test binary).
func Env(t testing.TB, name, skipped string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not set: CI must run these tests (%s)", name, skipped)
		}
		Once(name, fmt.Sprintf("%s is not set: %s", name, skipped))
		t.Skipf("%s not set", name)
	}
	return v
}
