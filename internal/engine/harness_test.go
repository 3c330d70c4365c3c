package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/llm/openai"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

const owner = "alice"

// harness is one engine on a fresh SQLite database, a memory pubsub and a
// fake OpenAI server reached through the official SDK.
type harness struct {
	t    *testing.T
	st   store.Store
	ps   pubsub.PubSub
	svc  *service.Service
	fake *llmtest.OpenAIChat
	cfg  engine.Config

	logs *logCapture

	mu      sync.Mutex
	engines []func() // stops each started engine
}

// logCapture keeps the engines' log records, so tests can wait for one.
type logCapture struct {
	mu   sync.Mutex
	recs []string
}

// captureHandler writes records, with their attributes, into a logCapture.
type captureHandler struct {
	l     *logCapture
	attrs string
}

func (c captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (c captureHandler) WithGroup(string) slog.Handler            { return c }
func (c captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		c.attrs += " " + a.String()
	}
	return c
}
func (c captureHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Message + c.attrs
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	c.l.mu.Lock()
	c.l.recs = append(c.l.recs, line)
	c.l.mu.Unlock()
	return nil
}

// waitLog waits for a record containing every one of parts.
func (h *harness) waitLog(parts ...string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		h.logs.mu.Lock()
		for _, r := range h.logs.recs {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(r, p)
			}
			if ok {
				h.logs.mu.Unlock()
				return
			}
		}
		h.logs.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("no log record with %q", parts)
}

// models is a fixed engine.Models.
type models map[string]llm.Model

func (m models) Model(name string) (llm.Model, bool) { v, ok := m[name]; return v, ok }

func newHarness(t *testing.T, tune ...func(*engine.Config)) *harness {
	t.Helper()
	return newHarnessOn(t, sqlitetest.Open(t, t.TempDir()), tune...)
}

// onBothStores runs test with a harness on SQLite and one on PostgreSQL
// (skipped without PARLEY_TEST_POSTGRES).
func onBothStores(t *testing.T, test func(t *testing.T, h *harness)) {
	t.Run("SQLite", func(t *testing.T) { test(t, newHarness(t)) })
	t.Run("PostgreSQL", func(t *testing.T) { test(t, newHarnessOn(t, pgtest.Store(t, pgtest.Migrated(t)))) })
}

// newHarnessOn is newHarness on the store st.
func newHarnessOn(t *testing.T, st store.Store, tune ...func(*engine.Config)) *harness {
	t.Helper()
	ctx := context.Background()
	ps := memory.New()
	h := &harness{t: t, st: st, ps: ps, fake: llmtest.NewOpenAIChat(t), logs: &logCapture{}}
	h.cfg = engine.Config{
		Concurrency:  8,
		LeaseTTL:     2 * time.Second,
		Heartbeat:    100 * time.Millisecond,
		PollInterval: 100 * time.Millisecond,
		MaxSteps:     5,
		Retry:        llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond},
		DeltaFlush:   time.Millisecond,
		Files:        st,
	}
	for _, f := range tune {
		f(&h.cfg)
	}
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "fake", Provider: "openai", Model: "gpt-test"}}
	cfg.DefaultModel = "fake"
	h.svc = service.New(st, ps, &cfg, nil)
	if _, err := st.InTx(ctx, func(tx store.Tx) error { _, err := tx.CreateOwner(ctx, owner); return err }), error(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stopAll()
		ps.Close()
	})
	return h
}

func (h *harness) models() models {
	p := openai.NewChat(openai.Config{BaseURL: h.fake.URL, APIKey: "test-key"})
	return models{"fake": {Name: "fake", Provider: p, ModelID: "gpt-test", InputPerMTok: 1, OutputPerMTok: 2}}
}

// start runs an engine until the test ends or stop is called.
func (h *harness) start(tools engine.Tools) (stop func()) {
	return h.startOn(h.st, h.ps, h.models(), tools)
}

// startOn runs an engine on st and ps (the harness's own, or wrappers
// around them) with the given models, and the harness's configuration or
// the one given.
func (h *harness) startOn(st store.Store, ps pubsub.PubSub, m engine.Models, tools engine.Tools, cfg ...engine.Config) (stop func()) {
	c := h.cfg
	if len(cfg) > 0 {
		c = cfg[0]
	}
	e := engine.New(c, st, ps, m, tools, slog.New(captureHandler{l: h.logs}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	h.mu.Lock()
	h.engines = append(h.engines, stop)
	h.mu.Unlock()
	return stop
}

func (h *harness) stopAll() {
	h.mu.Lock()
	stops := h.engines
	h.mu.Unlock()
	for _, s := range stops {
		s()
	}
}

// create makes a chat with a first message and a title (so no title is
// generated: its model call would take one of the fake's scripted turns).
func (h *harness) create(msg string, dyn ...chat.DynamicTool) chat.Chat {
	h.t.Helper()
	raw, _ := json.Marshal(msg)
	c, err := h.svc.CreateChat(context.Background(), owner, service.NewChat{Message: raw, Title: "test chat", DynamicTools: dyn})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// waitStatus waits until the chat is in want, failing after a deadline.
func (h *harness) waitStatus(id string, want chat.Status) chat.Chat {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := h.st.GetChat(context.Background(), id)
		if err != nil {
			h.t.Fatal(err)
		}
		if c.Status == want {
			return c
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("chat %s is %s (last_error %+v), want %s", id, c.Status, c.LastError, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRequests waits until the fake has received n requests.
func (h *harness) waitRequests(n int) []llmtest.Request {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := h.fake.Requests(); len(r) >= n {
			return r
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the fake got %d requests, want %d", len(h.fake.Requests()), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) history(id string) []chat.Message {
	h.t.Helper()
	msgs, err := h.st.ListMessages(context.Background(), id, 0, store.MaxPageSize)
	if err != nil {
		h.t.Fatal(err)
	}
	return msgs
}

// subscribe returns the chat's live events.
func (h *harness) subscribe(id string) <-chan events.ChatEvent {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	sub, err := h.ps.Subscribe(ctx, events.ChatTopic(id))
	if err != nil {
		h.t.Fatal(err)
	}
	out := make(chan events.ChatEvent, 1024)
	go func() {
		for m := range sub.C() {
			var ev events.ChatEvent
			if json.Unmarshal(m.Payload, &ev) == nil {
				out <- ev
			}
		}
	}()
	return out
}

// addTool is a registry with one server-side tool, "add", summing a and b;
// calls counts its invocations; each call first calls every function of
// arrive, then, when block is not nil, waits on it (or its context).
func addTool(t *testing.T, block chan struct{}, arrive ...func()) (*tools.Dispatcher, *atomic.Int64) {
	t.Helper()
	calls := &atomic.Int64{}
	reg := tools.NewRegistry(nil)
	add := tool.Func(tool.Decl{Name: "add", Description: "adds a and b",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}`)},
		func(ctx context.Context, c tool.Call) (tool.Result, error) {
			calls.Add(1)
			for _, f := range arrive {
				f()
			}
			if block != nil {
				select {
				case <-block:
				case <-ctx.Done():
					return tool.Result{}, ctx.Err()
				}
			}
			var in struct{ A, B int }
			if err := json.Unmarshal(c.Args, &in); err != nil {
				return tool.Result{}, err
			}
			return tool.JSON(in.A + in.B), nil
		})
	if err := reg.AddTool(add); err != nil {
		t.Fatal(err)
	}
	return tools.NewDispatcher(reg, tools.Options{}, nil), calls
}
