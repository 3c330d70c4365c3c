package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/tool"
)

// childEnv, when set, makes the test binary an MCP server on stdio instead:
// "serve" serves, "ignore-stdin" serves and then keeps running after its
// stdin closes, "crash" writes to stderr and exits at once. Two more modes
// are not servers: "sleep" sleeps until killed (a server's grandchild), and
// "parent" is a parley of its own (see runParent).
const childEnv = "PARLEY_MCP_TEST_CHILD"

// gateEnv and gateStartsEnv are, in mode "gate", the named pipe the child
// waits on before serving and the file it appends a line to at each start.
const (
	gateEnv       = "PARLEY_MCP_TEST_GATE"
	gateStartsEnv = "PARLEY_MCP_TEST_GATE_STARTS"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		runChild(mode)
		return
	}
	os.Exit(m.Run())
}

type dieIn struct {
	After int `json:"after"` // calls of block to wait for
}

func runChild(mode string) {
	switch mode {
	case "crash":
		fmt.Fprintln(os.Stderr, "fatal: bad configuration")
		os.Exit(1)
	case "sleep":
		for {
			time.Sleep(time.Hour) // until killed
		}
	case "parent":
		runParent()
		return
	case "gate":
		// A server whose command takes a while to start answering, as npx
		// does while it downloads a package: it counts its start, then
		// waits until the test writes to the gate (a named pipe).
		f, err := os.OpenFile(os.Getenv(gateStartsEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			_, err = f.WriteString("start\n")
			f.Close()
		}
		if err == nil {
			_, err = os.ReadFile(os.Getenv(gateEnv))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	fmt.Fprintln(os.Stderr, "test server starting")
	srv := mcp.NewServer(&mcp.Implementation{Name: "child", Version: "1"}, nil)
	blocked := make(chan struct{}, 100)
	mcp.AddTool(srv, &mcp.Tool{Name: "pid"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return text(strconv.Itoa(os.Getpid())), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "env"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		wd, _ := os.Getwd()
		return text(os.Getenv("PARLEY_MCP_TEST_VALUE") + " " + wd), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "spawn"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		// A grandchild of parley, in the server's process group, with none
		// of the server's pipes.
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = []string{childEnv + "=sleep"}
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		return text(strconv.Itoa(cmd.Process.Pid)), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if token := req.Params.GetProgressToken(); token != nil { // tell the client the call arrived
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Message: "blocked"}); err != nil {
				return nil, nil, err
			}
		}
		blocked <- struct{}{}
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "die"}, func(_ context.Context, _ *mcp.CallToolRequest, in dieIn) (*mcp.CallToolResult, any, error) {
		for range in.After {
			<-blocked
		}
		os.Exit(3)
		return nil, nil, nil
	})
	addUndecodable(srv, os.Stdout)
	err := srv.Run(context.Background(), &mcp.IOTransport{Reader: os.Stdin, Writer: tamperWriter{os.Stdout}})
	if mode == "ignore-stdin" {
		for {
			time.Sleep(time.Hour) // until SIGTERM
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// openChild opens a source whose server is this test binary in mode.
func openChild(t *testing.T, mode string, cfg Config) *Source {
	t.Helper()
	cfg.Name = "c"
	cfg.Command = []string{os.Args[0], "-test.run=^$"}
	if cfg.Env == nil {
		cfg.Env = map[string]string{}
	}
	cfg.Env[childEnv] = mode
	s := Open(cfg, fastOptions(t))
	t.Cleanup(func() { s.Close() })
	return s
}

func waitConnected(t *testing.T, s *Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitConnected(ctx); err != nil {
		t.Fatalf("connect: %v", err)
	}
}

func childPID(t *testing.T, s *Source) int {
	t.Helper()
	pid, err := strconv.Atoi(okText(t, invoke(t, s, call("c_pid", `{}`))[0]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// gone reports whether no process has the pid (the child exited and was
// reaped).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestStdioEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	s := openChild(t, "serve", Config{Env: map[string]string{"PARLEY_MCP_TEST_VALUE": "v1"}, Dir: dir})
	waitConnected(t, s)
	if got, want := okText(t, invoke(t, s, call("c_env", `{}`))[0]), "v1 "+dir; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestStdioServerKilledMidBatch(t *testing.T) {
	s := openChild(t, "serve", Config{})
	waitConnected(t, s)
	before := childPID(t, s)
	_, err := s.InvokeBatch(context.Background(), []tool.Call{
		call("c_block", `{}`), call("c_block", `{}`), call("c_die", `{"after":2}`),
	})
	if err == nil || !strings.Contains(err.Error(), "session lost") {
		t.Fatalf("InvokeBatch: %v, want a session lost error", err)
	}
	t.Logf("InvokeBatch: %v", err)
	eventually(t, "the source to reconnect", func() bool { return s.Status().State == tool.StateReady })
	after := childPID(t, s)
	if after == before {
		t.Fatalf("still pid %d", after)
	}
	if !gone(before) {
		t.Errorf("the dead child %d was not reaped", before)
	}
}

func TestCloseStopsTheChild(t *testing.T) {
	for _, mode := range []string{"serve", "ignore-stdin"} {
		t.Run(mode, func(t *testing.T) {
			s := openChild(t, mode, Config{})
			waitConnected(t, s)
			pid := childPID(t, s)
			start := time.Now()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Close took %v", took)
			}
			if !gone(pid) {
				t.Fatalf("child %d still runs", pid)
			}
			if st := s.Status(); len(mustTools(t, s)) != 0 {
				t.Errorf("tools after Close (status %+v)", st)
			}
		})
	}
}

func mustTools(t *testing.T, s *Source) []tool.Decl {
	t.Helper()
	decls, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return decls
}

func TestStdioServerDownAtStart(t *testing.T) {
	t.Run("no such program", func(t *testing.T) {
		s := Open(Config{Name: "x", Command: []string{"/nonexistent/parley-mcp-server"}}, fastOptions(t))
		defer s.Close()
		checkDown(t, s, "no such file")
	})
	t.Run("crashes at start", func(t *testing.T) {
		s := openChild(t, "crash", Config{})
		checkDown(t, s, "fatal: bad configuration")
	})
}

// checkDown checks a source whose first connection failed with an error
// that contains want.
func checkDown(t *testing.T, s *Source, want string) {
	t.Helper()
	err := s.WaitConnected(context.Background())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("WaitConnected: %v, want an error with %q", err, want)
	}
	st := s.Status()
	if st.State != tool.StateFailed || !strings.Contains(st.Error, want) {
		t.Errorf("status %+v", st)
	}
	if decls := mustTools(t, s); len(decls) != 0 {
		t.Errorf("tools %v", names(decls))
	}
	_, err = s.InvokeBatch(context.Background(), []tool.Call{call("x_any", `{}`)})
	if err == nil || !strings.Contains(err.Error(), "not connected: ") || !strings.Contains(err.Error(), want) {
		t.Errorf("InvokeBatch: %v", err)
	}
}

func TestInvalidConfigFailsForGood(t *testing.T) {
	s := Open(Config{Name: "x"}, fastOptions(t))
	defer s.Close()
	checkDown(t, s, "neither a command nor a URL")
}

// recordHandler counts log records by level and message.
type recordHandler struct {
	mu    sync.Mutex
	count map[string]int // "LEVEL message"
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.count[r.Level.String()+" "+r.Message]++
	return nil
}

func (h *recordHandler) get(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count[key]
}

// A server that keeps failing the same way is logged at warn level once.
func TestRepeatedConnectErrorIsLoggedOnce(t *testing.T) {
	h := &recordHandler{count: map[string]int{}}
	opts := fastOptions(t)
	opts.Logger = slog.New(h)
	s := Open(Config{Name: "x", Command: []string{"/nonexistent/parley-mcp-server"}}, opts)
	defer s.Close()
	eventually(t, "three more attempts", func() bool { return h.get("DEBUG mcp server: connect failed again") >= 3 })
	if n := h.get("WARN mcp server: connect failed; retrying"); n != 1 {
		t.Fatalf("%d warnings", n)
	}
}

// A stdio command that starts answering only long after connect_timeout (a
// package download on a first start) connects on its first attempt, and the
// log says parley is waiting for it.
func TestFirstConnectWaitsForTheCommand(t *testing.T) {
	dir := t.TempDir()
	gate, starts := dir+"/gate", dir+"/starts"
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &recordHandler{count: map[string]int{}}
	opts := fastOptions(t)
	opts.Logger = slog.New(h)
	s := Open(Config{
		Name:    "c",
		Command: []string{os.Args[0], "-test.run=^$"},
		Env:     map[string]string{childEnv: "gate", gateEnv: gate, gateStartsEnv: starts},
		// Far apart, so that the command is still held at the gate when
		// connect_timeout has passed, however slow the machine.
		ConnectTimeout:      500 * time.Millisecond,
		FirstConnectTimeout: time.Minute,
	}, opts)
	defer s.Close()

	// The log line comes once connect_timeout has passed without an answer.
	eventually(t, "the waiting log line", func() bool {
		return h.get("INFO mcp server: waiting for the command to start (a first start may download a package)") == 1
	})
	if st := s.Status(); st.State != tool.StateConnecting {
		t.Fatalf("status while waiting: %+v", st)
	}
	if err := os.WriteFile(gate, []byte("go"), 0o600); err != nil { // opens the gate
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitConnected(ctx); err != nil {
		t.Fatalf("the first attempt failed: %v", err)
	}
	b, err := os.ReadFile(starts)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "start"); n != 1 {
		t.Errorf("the command was started %d times, want once", n)
	}
	if n := len(mustTools(t, s)); n == 0 {
		t.Error("no tools after connecting")
	}
}
