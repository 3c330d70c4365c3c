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
	"strings"
)

func main() {
	os.Exit(run(context.Background(), os.Args, os.Stdout, os.Stderr, os.Getenv))
}

// progName is how the person started parley, for the commands it suggests:
// "go run ./cmd/parley" when arg0 is a binary go run built (in a go-build
// directory of the temporary directory), else "parley".
func progName(arg0 string) string {
	dir := filepath.Dir(arg0)
	if filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build") {
		return "go run ./cmd/parley"
	}
	return "parley"
}

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
