package mcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/parleyhq/parley/tool"
)

// noiseLines are what the "noise" tool writes to a stdio server's stdout:
// no line of it is a JSON-RPC message.
var noiseLines = strings.Join([]string{
	"this is not JSON",                   // what ended the session: invalid character 'h' in literal true
	`{"level":"info","msg":"listening"}`, // JSON, not JSON-RPC
	"true",                               // JSON, not an object
	`{"jsonrpc":"2.0",`,                  // a message pretty-printed over two lines
	`"method":"notifications/message","params":{}}`,
}, "\n") + "\n"

const skippedLine = "WARN mcp server: skipped a line on stdout that is not a JSON-RPC message"

// Lines on a stdio server's stdout that are not JSON-RPC messages are
// skipped and logged: the session stays, and a call in flight meanwhile
// (another chat's) gets its result.
func TestStdioSkipsLinesThatAreNotMessages(t *testing.T) {
	h := &recordHandler{count: map[string]int{}}
	opts := fastOptions(t)
	opts.Logger = slog.New(h)
	s := Open(Config{
		Name:    "c",
		Command: []string{os.Args[0], "-test.run=^$"},
		Env:     map[string]string{childEnv: "serve"},
	}, opts)
	defer s.Close()
	waitConnected(t, s)
	pid := childPID(t, s)
	before := s.current0()

	other := make(chan error, 1) // the call in flight while the server writes the noise
	go func() {
		res, err := s.InvokeBatch(context.Background(), []tool.Call{call("c_gate", `{}`)})
		if err == nil && (res[0].IsError || string(res[0].Output) != `"opened"`) {
			err = fmt.Errorf("its call: %s (error %v)", res[0].Output, res[0].IsError)
		}
		other <- err
	}()
	// noise writes once the gate call has reached the server.
	if got := okText(t, invoke(t, s, call("c_noise", `{}`))[0]); got != "quiet" {
		t.Fatalf("noise: %q", got)
	}
	if n := h.get(skippedLine); n != 5 {
		t.Errorf("%d lines logged as skipped, want 5", n)
	}
	okText(t, invoke(t, s, call("c_open", `{}`))[0])
	if err := receive(t, "the call in flight", other); err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if s.current0() != before || childPID(t, s) != pid {
		t.Error("the session was replaced")
	}
}

// The stdout filter drops exactly the lines that are no message; messages,
// blank lines and batches pass byte for byte.
func TestStdoutFilterDropsOnlyNonMessages(t *testing.T) {
	keep := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" +
		"\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\r\n" +
		`[{"jsonrpc":"2.0","id":2,"result":{}}]` + "\n"
	h := &recordHandler{count: map[string]int{}}
	got, err := io.ReadAll(newResponses().stdout(strings.NewReader(noiseLines+keep+noiseLines), slog.New(h)))
	if err != nil || string(got) != keep {
		t.Fatalf("got %q, %v\nwant %q", got, err, keep)
	}
	if n := h.get(skippedLine); n != 10 {
		t.Errorf("%d lines logged as skipped, want 10", n)
	}
}
