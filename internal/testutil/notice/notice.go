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
