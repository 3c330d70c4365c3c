package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/tool"
)

// objectSchema is the input schema of the test tools that take any object.
var objectSchema = map[string]any{"type": "object"}

// testServer is an SDK server with tools that let a test control when calls
// end, and see what the server saw.
type testServer struct {
	*mcp.Server

	mu      sync.Mutex
	arrived map[string]int           // barrier: calls arrived, by group
	full    map[string]chan struct{} // barrier: closed when a group is complete

	inflight, maxInflight atomic.Int32
	gaugeArrived          chan struct{} // gauge: a call started
	gaugeRelease          chan struct{} // gauge: lets one call end

	orderDone []chan struct{} // order: closed when call i ended

	slowStarted   chan struct{} // slow: a call started
	slowCancelled chan struct{} // slow: a call's context was done

	progressAck chan struct{} // progress: closed by the test when it saw the report

	releaseGates func() // ends the gate calls of addUndecodable
}

type barrierIn struct {
	Group string `json:"group"`
	N     int    `json:"n"`
}

type orderIn struct {
	I int `json:"i"`
}

type echoIn struct {
	Msg string `json:"msg"`
}

func newTestServer(orderN int) *testServer { return newTestServerWith(orderN, nil) }

func newTestServerWith(orderN int, opts *mcp.ServerOptions) *testServer {
	ts := &testServer{
		Server:        mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, opts),
		arrived:       map[string]int{},
		full:          map[string]chan struct{}{},
		gaugeArrived:  make(chan struct{}, 1000),
		gaugeRelease:  make(chan struct{}),
		slowStarted:   make(chan struct{}, 100),
		slowCancelled: make(chan struct{}, 100),
		progressAck:   make(chan struct{}),
	}
	for range orderN {
		ts.orderDone = append(ts.orderDone, make(chan struct{}))
	}
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "echo", Description: "Echoes msg."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Msg}}}, nil, nil
		})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "barrier", Description: "Returns once n calls of the group are in flight together."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in barrierIn) (*mcp.CallToolResult, any, error) {
			ts.mu.Lock()
			ch := ts.full[in.Group]
			if ch == nil {
				ch = make(chan struct{})
				ts.full[in.Group] = ch
			}
			ts.arrived[in.Group]++
			if ts.arrived[in.Group] == in.N {
				close(ch)
			}
			ts.mu.Unlock()
			select {
			case <-ch:
				return text("ok"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "gauge", Description: "Counts the calls in flight; each ends when the test releases one."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			n := ts.inflight.Add(1)
			defer ts.inflight.Add(-1)
			for {
				m := ts.maxInflight.Load()
				if n <= m || ts.maxInflight.CompareAndSwap(m, n) {
					break
				}
			}
			ts.gaugeArrived <- struct{}{}
			select {
			case <-ts.gaugeRelease:
				return text("released"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "order", Description: "Call i ends after call i+1: they end in reverse order."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in orderIn) (*mcp.CallToolResult, any, error) {
			if in.I+1 < len(ts.orderDone) {
				select {
				case <-ts.orderDone[in.I+1]:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			defer close(ts.orderDone[in.I])
			return text(fmt.Sprint(in.I)), nil, nil
		})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "fail", Description: "Fails as a tool."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("boom")
		})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "rpcfail", Description: "Fails with a JSON-RPC error."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, &jsonrpc.Error{Code: 4242, Message: "no such thing"}
		})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "slow", Description: "Waits until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			ts.slowStarted <- struct{}{}
			<-ctx.Done()
			ts.slowCancelled <- struct{}{}
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "progress", Description: "Reports progress, waits for the test to see it, ends."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2, Message: "half way",
			})
			if err != nil {
				return nil, nil, err
			}
			select {
			case <-ts.progressAck:
				return text("done"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	ts.AddTool(&mcp.Tool{Name: "shapes", Description: "Returns one block of every kind.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Content: []mcp.Content{
					&mcp.TextContent{Text: "hello"},
					&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3}},
					&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte{4}},
					&mcp.ResourceLink{URI: "file:///a.txt", Name: "a.txt", MIMEType: "text/plain", Description: "the a"},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///b.txt", MIMEType: "text/plain", Text: "bee"}},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///c.bin", Blob: []byte{5, 6}}},
				},
				StructuredContent: map[string]any{"n": 1},
			}, nil
		})
	ts.AddTool(&mcp.Tool{Name: "structured", Description: "Returns text and structured content.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: `{"n":1}`}},
				StructuredContent: map[string]any{"n": 1},
			}, nil
		})
	ts.releaseGates = addUndecodable(ts.Server, nil)
	return ts
}

// current0 returns the ready session, which there must be.
func (s *Source) current0() *session {
	sess, reason := s.current()
	if sess == nil {
		panic("no session: " + reason)
	}
	return sess
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// testLogger logs to the test's output when -v is given.
func testLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}

// fastOptions are options with short backoffs, for tests.
func fastOptions(t *testing.T) Options {
	return Options{Logger: testLogger(t), MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, terminate: 200 * time.Millisecond}
}

// memTransport connects to srv over the in-memory transport, a new server
// session for each connection.
func memTransport(srv interface {
	Connect(context.Context, mcp.Transport, *mcp.ServerSessionOptions) (*mcp.ServerSession, error)
}) func() (mcp.Transport, error) {
	return func() (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
}

// openMem opens a source on srv over the in-memory transport (a new server
// session for each connection) and waits for it to connect.
func openMem(t *testing.T, srv *mcp.Server, cfg Config) *Source {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "t"
	}
	cfg.Command = []string{"unused"}
	opts := fastOptions(t)
	opts.transport = memTransport(srv)
	s := Open(cfg, opts)
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitConnected(ctx); err != nil {
		t.Fatalf("connect: %v", err)
	}
	return s
}

func call(name, args string) tool.Call {
	return tool.Call{ID: name, Name: name, Args: json.RawMessage(args), ChatID: "chat"}
}

func invoke(t *testing.T, s *Source, calls ...tool.Call) []tool.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.InvokeBatch(ctx, calls)
	if err != nil {
		t.Fatalf("InvokeBatch: %v", err)
	}
	if len(res) != len(calls) {
		t.Fatalf("got %d results for %d calls", len(res), len(calls))
	}
	return res
}

// okText returns a successful result's output, which must be a JSON string.
func okText(t *testing.T, r tool.Result) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("error result: %s", r.Output)
	}
	var s string
	if err := json.Unmarshal(r.Output, &s); err != nil {
		t.Fatalf("output %s is not a JSON string", r.Output)
	}
	return s
}

// eventually polls cond until it holds or 10s have passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// receive waits for a value on ch for at most 10s.
func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func names(decls []tool.Decl) string {
	var out []string
	for _, d := range decls {
		out = append(out, d.Name)
	}
	return strings.Join(out, ",")
}
