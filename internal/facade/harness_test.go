package facade_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/catalog"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// serverTool is the server-side tool every test server has; its result is
// lookupResult.
const (
	serverTool   = "lookup"
	lookupResult = "the answer is 42"
)

// replica is one parley server under test: its API (with the facade) on an
// httptest server, over its store and pubsub.
type replica struct {
	t   *testing.T
	url string
	st  store.Store
	ps  pubsub.PubSub
	cfg *config.Config
	reg *tools.Registry
	hc  *http.Client // checks every /v1 answer (nosniffCheck)
}

// nosniffCheck fails the test of any /v1 answer without
// "X-Content-Type-Options: nosniff": every facade answer has it, JSON,
// errors and streams alike.
type nosniffCheck struct{ t *testing.T }

func (c nosniffCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && strings.HasPrefix(req.URL.Path, "/v1/") && res.Header.Get("X-Content-Type-Options") != "nosniff" {
		c.t.Errorf("%s %s: %d answered without X-Content-Type-Options: nosniff (%q)",
			req.Method, req.URL.Path, res.StatusCode, res.Header.Get("X-Content-Type-Options"))
	}
	return res, err
}

// testLog is the servers' logger: warnings and worse, into the test's output.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// fakeConfig has one model, "fake", served by the Chat Completions fake.
func fakeConfig(fake *llmtest.OpenAIChat) *config.Config {
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "fake", Provider: "openai", Model: "gpt-test", BaseURL: fake.URL, APIKeyEnv: "FAKE_OPENAI_KEY"}}
	cfg.DefaultModel = "fake"
	return &cfg
}

// registry has the one server-side tool.
func registry(t *testing.T) *tools.Registry {
	reg := tools.NewRegistry(nil)
	err := reg.AddTool(tool.Func(tool.Decl{Name: serverTool, Description: "looks things up", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, tool.Call) (tool.Result, error) { return tool.JSON(lookupResult), nil }))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// serve starts a replica's API over st and ps; opts adjust its Deps.
func serve(t *testing.T, st store.Store, ps pubsub.PubSub, fake *llmtest.OpenAIChat, opts ...func(*api.Deps)) *replica {
	t.Helper()
	r := &replica{t: t, st: st, ps: ps, cfg: fakeConfig(fake), reg: registry(t), hc: &http.Client{Transport: nosniffCheck{t}}}
	d := api.Deps{Config: r.cfg, Store: st, PubSub: ps, Logger: testLog(t), Registry: prometheus.NewRegistry(),
		KeepAlive: time.Hour, Tools: r.reg}
	for _, o := range opts {
		o(&d)
	}
	h, err := api.New(d)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { ps.Close() }) // before the server closes: open streams end
	r.url = srv.URL
	return r
}

// newSQLite starts a replica on a fresh SQLite database with an engine
// whose model is a fresh fake.
func newSQLite(t *testing.T, opts ...func(*api.Deps)) (*replica, *llmtest.OpenAIChat) {
	t.Helper()
	fake := llmtest.NewOpenAIChat(t)
	r := serve(t, sqlitetest.Open(t, t.TempDir()), memory.New(), fake, opts...)
	r.runEngine()
	return r, fake
}

// newPostgres starts a replica on a fresh PostgreSQL schema (skipped
// without PARLEY_TEST_POSTGRES) with an engine whose model is a fresh fake.
func newPostgres(t *testing.T, opts ...func(*api.Deps)) (*replica, *llmtest.OpenAIChat) {
	t.Helper()
	dsn := pgtest.Migrated(t)
	fake := llmtest.NewOpenAIChat(t)
	st, ps := pgtest.Replica(t, dsn, "parley_test_"+strings.ToLower(rand.Text()[:10]), testLog(t))
	r := serve(t, st, ps, fake, opts...)
	r.runEngine()
	return r, fake
}

// onBothStores runs test as a subtest on SQLite and on PostgreSQL.
func onBothStores(t *testing.T, test func(t *testing.T, r *replica, fake *llmtest.OpenAIChat)) {
	t.Run("sqlite", func(t *testing.T) {
		r, fake := newSQLite(t)
		test(t, r, fake)
	})
	t.Run("postgres", func(t *testing.T) {
		r, fake := newPostgres(t)
		test(t, r, fake)
	})
}

// post sends body to path (under /v1) with tok, and returns the status
// and the decoded answer.
func (r *replica) post(tok, path, body string) (int, map[string]any) {
	r.t.Helper()
	req, err := http.NewRequest("POST", r.url+"/v1"+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	res, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		r.t.Fatalf("POST %s: %d, undecodable answer: %v", path, res.StatusCode, err)
	}
	return res.StatusCode, out
}

// runEngine runs an engine over the replica's store and pubsub until the
// test ends, its models built as `parley serve` builds them. Workers are
// woken by pubsub only (the poll interval is an hour).
func (r *replica) runEngine() {
	t := r.t
	models, err := catalog.New(r.cfg, func(string) string { return "test-key" }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{
		Concurrency: 4, LeaseTTL: 5 * time.Second, Heartbeat: 100 * time.Millisecond, PollInterval: time.Hour,
		MaxSteps: 5, DeltaFlush: time.Millisecond,
		Retry: llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond},
		Files: r.st,
	}
	e := engine.New(cfg, r.st, r.ps, models, tools.NewDispatcher(r.reg, tools.Options{}, nil), testLog(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// token issues a token for owner.
func (r *replica) token(owner string) string {
	r.t.Helper()
	plain, _, err := auth.Issue(context.Background(), r.st, owner, "test")
	if err != nil {
		r.t.Fatal(err)
	}
	return plain
}

// client is the official SDK pointed at the replica's /v1 with a token.
func (r *replica) client(tok string) openai.Client {
	return openai.NewClient(option.WithBaseURL(r.url+"/v1"), option.WithAPIKey(tok), option.WithMaxRetries(0),
		option.WithHTTPClient(r.hc))
}

// chats lists owner's chats.
func (r *replica) chats(owner string) []chat.Chat {
	r.t.Helper()
	page, err := r.st.ListChats(context.Background(), store.ChatQuery{Owner: owner, Limit: 100})
	if err != nil {
		r.t.Fatal(err)
	}
	return page.Chats
}

// onlyChat returns owner's one chat, failing if there is not exactly one.
func (r *replica) onlyChat(owner string) chat.Chat {
	r.t.Helper()
	cs := r.chats(owner)
	if len(cs) != 1 {
		r.t.Fatalf("%s has %d chats, want 1", owner, len(cs))
	}
	return cs[0]
}

// modelMessage is a message of a request the fake received.
type modelMessage struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// modelRequest decodes the i-th request the fake received (0-based),
// failing if the fake refused it.
func modelRequest(t *testing.T, fake *llmtest.OpenAIChat, i int) (msgs []modelMessage, toolNames []string) {
	t.Helper()
	reqs := fake.Requests()
	if i >= len(reqs) {
		t.Fatalf("the model got %d requests, want at least %d", len(reqs), i+1)
	}
	if reqs[i].Rejected != "" {
		t.Fatalf("the model refused request %d: %s", i, reqs[i].Rejected)
	}
	var body struct {
		Messages []modelMessage `json:"messages"`
		Tools    []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[i].Body, &body); err != nil {
		t.Fatal(err)
	}
	for _, tl := range body.Tools {
		toolNames = append(toolNames, tl.Function.Name)
	}
	return body.Messages, toolNames
}

// roles lists the roles of msgs, for assertions.
func roles(msgs []modelMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

// weatherTool is the client function the tests declare.
func weatherTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("the weather in a city"),
		Parameters:  openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	})
}

// history reads a chat's messages.
func (r *replica) history(id string) []chat.Message {
	r.t.Helper()
	var out []chat.Message
	err := store.ForEachMessage(context.Background(), r.st, id, 0, func(m chat.Message) error {
		out = append(out, m)
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// streamWait bounds how long a test waits for the next line of a stream:
// a regression fails with a message instead of hanging until go test's
// -timeout.
const streamWait = 30 * time.Second

// streamLines yields the lines of body, failing the test if none comes
// for wait (or the body ends in an error). The body is closed when the
// test ends, which ends the reading goroutine.
func streamLines(t *testing.T, body io.ReadCloser, wait time.Duration) func(yield func(string) bool) {
	t.Helper()
	type line struct {
		text string
		err  error
		eof  bool
	}
	ch := make(chan line)
	done := make(chan struct{})
	t.Cleanup(func() { close(done); body.Close() })
	go func() {
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case ch <- line{text: sc.Text()}:
			case <-done:
				return
			}
		}
		select {
		case ch <- line{err: sc.Err(), eof: true}:
		case <-done:
		}
	}()
	return func(yield func(string) bool) {
		t.Helper()
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for {
			select {
			case l := <-ch:
				if l.eof {
					if l.err != nil {
						t.Fatalf("stream: %v", l.err)
					}
					return
				}
				if !yield(l.text) {
					return
				}
				timer.Reset(wait)
			case <-timer.C:
				t.Fatalf("no line of the stream for %v", wait)
			}
		}
	}
}
