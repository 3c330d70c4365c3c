package mcp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/tool"
)

// protocols are the protocol versions the HTTP tests run with: the SDK's
// newest (stateless: the SDK's handler serves it only in stateless mode) and
// the newest before it, with sessions.
var protocols = []string{"2026-07-28", "2025-11-25"}

// httpServer serves a test server over streamable HTTP and records the
// headers of the requests it gets.
type httpServer struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
}

// newHTTPHandler serves ts. A stateless server's tool handlers see a call
// cancelled only when it ties them to their HTTP requests: under the
// stateless protocol, the client's notifications/cancelled arrives in a
// request of its own, which knows nothing of the call.
func newHTTPHandler(ts *testServer, stateless bool) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ts.Server },
		&mcp.StreamableHTTPOptions{Stateless: stateless, PropagateRequestCancellation: stateless})
}

func serveHTTP(t *testing.T, version string) (*testServer, *httpServer) {
	t.Helper()
	ts := newTestServerWith(0, &mcp.ServerOptions{SupportedProtocolVersions: []string{version}})
	hs := &httpServer{}
	h := newHTTPHandler(ts, version >= "2026-07-28")
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.mu.Lock()
		hs.headers = append(hs.headers, r.Header.Clone())
		hs.mu.Unlock()
		h.ServeHTTP(tamperResponseWriter{w}, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(ts.releaseGates) // before hs.Close, which waits for the handlers
	return ts, hs
}

func openHTTP(t *testing.T, url string, cfg Config) *Source {
	t.Helper()
	cfg.Name = "h"
	cfg.URL = url
	s := Open(cfg, fastOptions(t))
	t.Cleanup(func() { s.Close() })
	return s
}

func TestHTTP(t *testing.T) {
	for _, version := range protocols {
		t.Run(version, func(t *testing.T) {
			ts, hs := serveHTTP(t, version)
			s := openHTTP(t, hs.URL, Config{
				Headers:     map[string]string{"X-Api-Key": "k1"},
				BearerToken: "tok",
				CallTimeout: 100 * time.Millisecond,
			})
			waitConnected(t, s)
			if v := s.current0().cs.InitializeResult().ProtocolVersion; v != version {
				t.Fatalf("protocol %s, want %s", v, version)
			}
			res := invoke(t, s, call("h_echo", `{"msg":"over http"}`), call("h_rpcfail", `{}`), call("h_slow", `{}`))
			if got := okText(t, res[0]); got != "over http" {
				t.Errorf("echo: %q", got)
			}
			if !res[1].IsError || !strings.Contains(string(res[1].Output), "no such thing (code 4242)") {
				t.Errorf("rpcfail: %s", res[1].Output)
			}
			if !res[2].IsError || string(res[2].Output) != `"timed out after 100ms"` {
				t.Errorf("slow: %s", res[2].Output)
			}
			hs.mu.Lock()
			for _, h := range hs.headers {
				if h.Get("X-Api-Key") != "k1" || h.Get("Authorization") != "Bearer tok" {
					t.Errorf("request without the configured headers: %v", h)
					break
				}
			}
			hs.mu.Unlock()

			// progress
			c := call("h_progress", `{}`)
			var got []tool.Progress
			c.Progress = func(p tool.Progress) { got = append(got, p); close(ts.progressAck) }
			if out := okText(t, invoke(t, s, c)[0]); out != "done" || len(got) != 1 || got[0].Message != "half way" {
				t.Errorf("progress: %q, %v", out, got)
			}

			// list_changed
			mcp.AddTool(ts.Server, &mcp.Tool{Name: "late"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return text("late"), nil, nil
			})
			eventually(t, "the new tool", func() bool { return strings.Contains(names(mustTools(t, s)), "h_late") })
		})
	}
}

func TestHTTPCancelReachesTheServer(t *testing.T) {
	for _, version := range protocols {
		t.Run(version, func(t *testing.T) {
			ts, hs := serveHTTP(t, version)
			s := openHTTP(t, hs.URL, Config{})
			waitConnected(t, s)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := s.InvokeBatch(ctx, []tool.Call{call("h_slow", `{}`)})
				errc <- err
			}()
			receive(t, "the call to start", ts.slowStarted)
			cancel()
			if err := receive(t, "InvokeBatch", errc); err != context.Canceled {
				t.Fatalf("InvokeBatch: %v", err)
			}
			receive(t, "the server to see the cancellation", ts.slowCancelled)
		})
	}
}

func TestHTTPServerDownAtStartThenUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	s := openHTTP(t, "http://"+addr+"/mcp", Config{})
	checkDown(t, s, "connection refused")

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	srv := httptest.NewUnstartedServer(newHTTPHandler(newTestServer(0), true))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() { s.Close(); srv.Close() }) // the source first: it holds requests open
	eventually(t, "the source to connect", func() bool { return s.Status().State == tool.StateReady })
	if got := okText(t, invoke(t, s, call("h_echo", `{"msg":"up"}`))[0]); got != "up" {
		t.Fatalf("echo: %q", got)
	}
}

// The server goes away while a call runs: before its response began (the
// request fails) and after (its event stream breaks off).
func TestHTTPServerGoneMidBatch(t *testing.T) {
	for _, version := range protocols {
		for _, started := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/response started %v", version, started), func(t *testing.T) {
				ts, hs := serveHTTP(t, version)
				s := openHTTP(t, hs.URL, Config{CallTimeout: time.Minute})
				waitConnected(t, s)
				c := call("h_slow", `{}`)
				progressed := make(chan struct{}, 1)
				if started { // the progress report starts the response
					c = call("h_progress", `{}`)
					c.Progress = func(tool.Progress) { progressed <- struct{}{} }
				}
				errc := make(chan error, 1)
				go func() {
					_, err := s.InvokeBatch(context.Background(), []tool.Call{c})
					errc <- err
				}()
				if started {
					receive(t, "the progress report", progressed)
				} else {
					receive(t, "the call to start", ts.slowStarted)
				}
				hs.Listener.Close()
				hs.CloseClientConnections()
				err := receive(t, "InvokeBatch", errc)
				if err == nil || !strings.Contains(err.Error(), "session lost") {
					t.Fatalf("InvokeBatch: %v, want a session lost error", err)
				}
				t.Logf("InvokeBatch: %v", err)
				eventually(t, "the source to give the session up", func() bool { return s.Status().State != tool.StateReady })
				close(ts.progressAck)
			})
		}
	}
}
