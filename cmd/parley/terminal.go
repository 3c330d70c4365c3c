package main

import (
	"io"
	"os"
)

// isTerminal reports whether w is a terminal a person reads: a character
// device other than /dev/null, with TERM not "dumb". serve then keeps its
// address out of the log, and chat shows its status line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}
