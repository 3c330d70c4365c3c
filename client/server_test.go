package client_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/echo"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/testutil/poll"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
	"github.com/parleyhq/parley/internal/tools"
)

// wait bounds every wait of these tests.
const wait = 10 * time.Second

// server is a real parley in process: the HTTP API and the engine with the
// echo model, on SQLite and the memory pubsub. Requests pass through
// intercept first, when it is set, so a test can cut or fake a response, or
// serve the request with api itself to act around it; every request is
// recorded.
type server struct {
	t     *testing.T
	srv   *httptest.Server
	api   http.Handler
	url   string
	token string

	mu        sync.Mutex
	requests  []*http.Request
	intercept func(w http.ResponseWriter, r *http.Request) bool // true: answered
}

type models map[string]llm.Model

func (m models) Model(name string) (llm.Model, bool) { v, ok := m[name]; return v, ok }

func newServer(t *testing.T) *server { return newServerWith(t, nil) }

// newServerWith is newServer with the server-side tools of reg (nil: none)
// in the API and the engine.
func newServerWith(t *testing.T, reg *tools.Registry) *server {
	t.Helper()
	ctx := context.Background()
	st := sqlitetest.Open(t, t.TempDir())
	cfg := config.Default()
	// "ghost" is configured but the engine does not have it: its chats fail.
	// "echo" has a context window, so its chats show their context; it is
	// large enough that nothing is compacted unless asked.
	cfg.Models = []config.Model{{Name: "echo", Provider: "echo", Model: "echo", ContextWindow: 100_000}, {Name: "ghost", Provider: "echo", Model: "echo"}}
	cfg.DefaultModel = "echo"
	ps := memory.New()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	var tl engine.Tools
	if reg != nil {
		tl = tools.NewDispatcher(reg, tools.Options{}, log)
	}
	h, err := api.New(api.Deps{Config: &cfg, Store: st, PubSub: ps, Logger: log, Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(engine.Config{PollInterval: 50 * time.Millisecond, Heartbeat: 100 * time.Millisecond,
		LeaseTTL: 2 * time.Second, DeltaFlush: time.Millisecond},
		st, ps, models{"echo": {Name: "echo", Provider: echo.New(), ModelID: "echo", ContextWindow: 100_000}}, tl, log)
	ectx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ectx) }()

	s := &server{t: t, api: h}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Clone(context.Background()))
		icpt := s.intercept
		s.mu.Unlock()
		if icpt != nil && icpt(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	s.url = s.srv.URL
	t.Cleanup(func() {
		cancel()
		<-done
		ps.Close() // ends open streams, so Close does not wait for them
		s.srv.Close()
	})
	if s.token, _, err = auth.Issue(ctx, st, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	return s
}

// client returns a client of the server with the owner's token and fast
// reconnects.
func (s *server) client(opts ...client.Option) *client.Client {
	return client.New(s.url, s.token, append([]client.Option{client.WithReconnectDelay(5*time.Millisecond, 50*time.Millisecond)}, opts...)...)
}

// setIntercept installs f in front of the API.
func (s *server) setIntercept(f func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	s.intercept = f
	s.mu.Unlock()
}

// requestsTo returns the recorded requests whose path is path.
func (s *server) requestsTo(path string) []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*http.Request
	for _, r := range s.requests {
		if r.URL.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// waitStatus polls the chat until it is in status want.
func waitStatus(t *testing.T, c *client.Client, id, want string) client.Chat {
	t.Helper()
	deadline := time.Now().Add(wait)
	var pause poll.Backoff
	for {
		ch, err := c.GetChat(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Status == want {
			return ch
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat %s is %s (last_error %+v), want %s", id, ch.Status, ch.LastError, want)
		}
		pause.Sleep()
	}
}

// testCtx is a context that ends with the test, or after wait.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}
