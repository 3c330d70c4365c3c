// Command parley is a self-hosted LLM agent chat server.
//
// Run "parley serve" to start it on an embedded SQLite database in
// ./parley-data, and "parley help" for the other commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

func main() {
	os.Exit(run(context.Background(), os.Args, os.Stdout, os.Stderr, os.Getenv))
}

// progName is how the person started parley, for the commands it suggests:
// "go run ./cmd/parley" when arg0 is a binary go run built, else "parley".
// go run builds into a go-build directory of the temporary directory
// (…/go-build123/b001/exe/parley), and from then on runs the executable it
// keeps in the build cache (…/go-build/3a/3a…64 hex digits…-d/parley).
func progName(arg0 string) string {
	dir := filepath.Dir(arg0)
	if filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build") {
		return "go run ./cmd/parley"
	}
	if m := cachedExe.FindStringSubmatch(filepath.ToSlash(dir)); m != nil && strings.HasPrefix(m[2], m[1]) {
		return "go run ./cmd/parley"
	}
	return "parley"
}

// cachedExe matches the directory of an executable in the build cache: a
// subdirectory named by the first byte of the entry's hash, then the hash
// and "-d".
var cachedExe = regexp.MustCompile(`/([0-9a-f]{2})/([0-9a-f]{64})-d$`)

// run executes the command line argv (the program, then its arguments) and
// returns the process exit code: 0 on success, 2 for a usage error, 1 for
// any other failure. The one logger of the process is made here and handed
// to every command.
func run(ctx context.Context, argv []string, stdout, stderr io.Writer, getenv func(string) string) int {
	level := new(slog.LevelVar)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv, log: log, level: level, prog: progName(argv[0])}
	args := argv[1:]

	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "parley:", err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", ue.cmd)
		return 2
	}
	return 1
}

// usageError is a command line that does not parse: wrong flags or arguments.
type usageError struct {
	cmd string // the command's path, like "parley token revoke"
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
