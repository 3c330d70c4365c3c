// Package e2e tests parley through its HTTP API with the real engine, tools
// and stores, and a fake model server speaking the OpenAI wire format.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/llm/openai"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/poll"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// server is one parley replica: API, engine and tools over a store.
type server struct {
	t     *testing.T
	url   string
	token string
	st    store.Store
	ps    pubsub.PubSub
	fake  *llmtest.OpenAIChat
	reg   *tools.Registry
	cfg   *config.Config
	stop  func()
}

type models map[string]llm.Model

func (m models) Model(name string) (llm.Model, bool) { v, ok := m[name]; return v, ok }

// openSQLite opens a migrated SQLite store in dir.
func openSQLite(t *testing.T, dir string) store.Store { return sqlitetest.Open(t, dir) }

// start runs a replica on st, with an in-memory pubsub, the fake as the
// "fake" model, and the tools registered by setup.
func start(t *testing.T, st store.Store, fake *llmtest.OpenAIChat, setup func(reg *tools.Registry)) *server {
	t.Helper()
	p := openai.NewChat(openai.Config{BaseURL: fake.URL, APIKey: "k"})
	s := startReplica(t, replica{st: st, ps: memory.New(), setup: setup,
		models: models{"fake": {Name: "fake", Provider: p, ModelID: "gpt-test"}}})
	s.fake = fake
	return s
}

// replica is what one parley process is made of.
type replica struct {
	st     store.Store
	ps     pubsub.PubSub // closed when the replica stops
	models models        // the first one listed in the config is the default
	setup  func(reg *tools.Registry)
	token  string // "" issues one for alice
}

// startReplica runs the API and an engine over r.
func startReplica(t *testing.T, r replica) *server {
	t.Helper()
	cfg := config.Default()
	for name := range r.models {
		cfg.Models = append(cfg.Models, config.Model{Name: name, Provider: "echo", Model: name})
	}
	cfg.DefaultModel = cfg.Models[0].Name
	reg := tools.NewRegistry(nil)
	if r.setup != nil {
		r.setup(reg)
	}
	h, err := api.New(api.Deps{Config: &cfg, Store: r.st, PubSub: r.ps, Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	ec := engine.Config{PollInterval: 50 * time.Millisecond, Heartbeat: 100 * time.Millisecond, LeaseTTL: 2 * time.Second,
		DeltaFlush: time.Millisecond, Retry: llm.RetryPolicy{MaxAttempts: 1}, Files: r.st}
	eng := engine.New(ec, r.st, r.ps, r.models, tools.NewDispatcher(reg, tools.Options{}, nil), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	tok := r.token
	if tok == "" {
		if tok, _, err = auth.Issue(context.Background(), r.st, "alice", "test"); err != nil {
			t.Fatal(err)
		}
	}
	s := &server{t: t, url: srv.URL, token: tok, st: r.st, ps: r.ps, reg: reg, cfg: &cfg}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			r.ps.Close()
			srv.Close()
		})
	}
	t.Cleanup(s.stop)
	return s
}

// call sends a request and decodes a JSON answer into out (if not nil); it
// returns the status code.
func (s *server) call(method, path string, body, out any) int {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return res.StatusCode
}

// waitStatus polls GET /chats/{id} until the chat is in want.
func (s *server) waitStatus(id string, want chat.Status) chat.Chat {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var pause poll.Backoff
	for {
		var c chat.Chat
		if code := s.call("GET", "/api/v1/chats/"+id, nil, &c); code != 200 {
			s.t.Fatalf("GET chat: %d", code)
		}
		if c.Status == want {
			return c
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("chat %s is %s (last_error %+v), want %s", id, c.Status, c.LastError, want)
		}
		pause.Sleep()
	}
}

func (s *server) messages(id string) []chat.Message {
	s.t.Helper()
	var body struct{ Messages []chat.Message }
	s.call("GET", "/api/v1/chats/"+id+"/messages?limit=500", nil, &body)
	return body.Messages
}

// source is a test tool source: it records its batches, and runs fn on each.
type source struct {
	name  string
	decls []tool.Decl
	fn    func(ctx context.Context, calls []tool.Call) ([]tool.Result, error)

	mu      sync.Mutex
	batches [][]string // call ids of each batch
}

func (s *source) Name() string                               { return s.name }
func (s *source) Tools(context.Context) ([]tool.Decl, error) { return s.decls, nil }
func (s *source) Close() error                               { return nil }
func (s *source) InvokeBatch(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	s.mu.Lock()
	s.batches = append(s.batches, ids)
	s.mu.Unlock()
	return s.fn(ctx, calls)
}

func (s *source) seen() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.batches...)
}

func decl(name string) tool.Decl {
	return tool.Decl{Name: name, Description: name, InputSchema: json.RawMessage(`{"type":"object"}`)}
}

// echoResults answers each call with its own id.
func echoResults(calls []tool.Call) []tool.Result {
	out := make([]tool.Result, len(calls))
	for i, c := range calls {
		out[i] = tool.JSON(c.Name + ":" + c.ID)
	}
	return out
}
