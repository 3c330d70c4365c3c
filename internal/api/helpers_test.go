package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
	"github.com/parleyhq/parley/internal/tools"
)

// server is one API instance under test.
type server struct {
	t   *testing.T
	url string
	st  store.Store
	ps  pubsub.PubSub
	cfg *config.Config
	reg *tools.Registry // the server-side tools, for the engine too; nil for none
	// live: an engine answers with a fake provider, which would be asked
	// for titles too (createChat).
	live bool
}

// setup adjusts a test server before it starts.
type setup struct {
	cfg        *config.Config
	keepAlive  time.Duration
	tokenCheck time.Duration    // how often streams re-read their token; 0: the default
	bufferSize int              // of the memory pubsub's subscriptions; 0: its default
	tools      *tools.Registry  // server-side tools; nil for none
	fakeURL    string           // a fake model's, for the setups that configure it
	now        func() time.Time // the API's clock; nil: time.Now
}

// testConfig is the default configuration with two models, "echo" the default.
func testConfig() *config.Config {
	cfg := config.Default()
	cfg.Models = []config.Model{
		{Name: "echo", Provider: "echo", Model: "echo"},
		{Name: "fast", Provider: "openai", Model: "gpt-5-mini", BaseURL: "http://127.0.0.1:1/v1", APIKeyEnv: "SECRET_KEY_ENV"},
	}
	cfg.DefaultModel = "echo"
	return &cfg
}

// newSQLite starts an API on a fresh SQLite database and an in-memory pubsub.
func newSQLite(t *testing.T, opts ...func(*setup)) *server {
	t.Helper()
	s := setup{cfg: testConfig(), keepAlive: time.Hour}
	for _, o := range opts {
		o(&s)
	}
	st := sqlitetest.Open(t, t.TempDir())
	return start(t, st, memory.New(memory.WithBufferSize(s.bufferSize)), s)
}

// start serves an API over st and ps on an httptest server.
func start(t *testing.T, st store.Store, ps pubsub.PubSub, s setup) *server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := api.New(api.Deps{Config: s.cfg, Store: st, PubSub: ps, Logger: log, Registry: prometheus.NewRegistry(), KeepAlive: s.keepAlive, TokenCheck: s.tokenCheck, Tools: s.tools, Now: s.now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	// Close the pubsub before the server, so open streams end and Close
	// does not wait for them (cleanups run last-registered first).
	t.Cleanup(srv.Close)
	t.Cleanup(func() { ps.Close() })
	return &server{t: t, url: srv.URL, st: st, ps: ps, cfg: s.cfg, reg: s.tools}
}

// token issues a token for owner.
func (s *server) token(owner string) string {
	s.t.Helper()
	plain, _, err := auth.Issue(context.Background(), s.st, owner, "test")
	if err != nil {
		s.t.Fatal(err)
	}
	return plain
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; body is JSON-encoded unless it is a string or []byte,
// which are sent as they are.
func (s *server) do(method, path, token string, body any) response {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// expect fails unless the answer has status, then decodes its body into v
// (when v is not nil).
func (r response) expect(t *testing.T, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	ct := r.header.Get("Content-Type")
	if len(r.body) > 0 && !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "text/plain; version=") {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	if strings.HasPrefix(ct, "application/json") && r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("a JSON answer without X-Content-Type-Options: nosniff (%q)", r.header.Get("X-Content-Type-Options"))
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

// apiErr is the error body.
type apiErr struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

// expectError fails unless the answer is an error body with status and code;
// it returns the body.
func (r response) expectError(t *testing.T, status int, code string) apiErr {
	t.Helper()
	var e apiErr
	r.expect(t, status, &e)
	if e.Error.Code != code || e.Error.Message == "" {
		t.Fatalf("error %+v, want code %q with a message; body %s", e.Error, code, r.body)
	}
	return e
}

// createChat creates a chat for the token's owner and returns it. On a live
// server, a chat created without a message or a title gets the title "test
// chat": else its first message would title it, and the title's model call
// would take one of the fake's scripted turns.
func (s *server) createChat(token string, body map[string]any) chat.Chat {
	s.t.Helper()
	if s.live && body["title"] == nil && body["message"] == nil {
		body = maps.Clone(body)
		if body == nil {
			body = map[string]any{}
		}
		body["title"] = "test chat"
	}
	var c chat.Chat
	s.do("POST", "/api/v1/chats", token, body).expect(s.t, http.StatusCreated, &c)
	return c
}

// chatList is the body of GET /api/v1/chats.
type chatList struct {
	Chats      []chat.Chat `json:"chats"`
	NextCursor string      `json:"next_cursor"`
}

// listChats lists the token owner's chats with a query string.
func (s *server) listChats(token, query string) chatList {
	s.t.Helper()
	var l chatList
	s.do("GET", "/api/v1/chats"+query, token, nil).expect(s.t, http.StatusOK, &l)
	return l
}

// messages returns every message of a chat.
func (s *server) messages(token, id string) []chat.Message {
	s.t.Helper()
	var body struct{ Messages []chat.Message }
	s.do("GET", "/api/v1/chats/"+id+"/messages", token, nil).expect(s.t, http.StatusOK, &body)
	return body.Messages
}

// force walks a chat through status transitions directly in the store, as
// the engine does; extra messages are appended first.
func (s *server) force(id string, msgs []chat.Message, path ...store.Transition) {
	s.t.Helper()
	ctx := context.Background()
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		for _, m := range msgs {
			m.ChatID = id
			if err := tx.InsertMessage(ctx, &m); err != nil {
				return err
			}
		}
		for _, tr := range path {
			if _, err := tx.TransitionChat(ctx, id, tr); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// chatIDs lists the ids of chats in order.
func chatIDs(cs []chat.Chat) []string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids
}

// postAtOnce releases n POSTs of body to path together, the i-th to
// replicas[i%len(replicas)], and returns their answers in order: the tests
// of "the first submission wins".
func postAtOnce(t *testing.T, replicas []*server, path, token string, body []byte, n int) []response {
	t.Helper()
	answers := make([]response, n)
	var wg sync.WaitGroup
	release := make(chan struct{})
	for i := range n {
		s := replicas[i%len(replicas)]
		wg.Go(func() {
			<-release
			req, err := http.NewRequest("POST", s.url+path, bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			if err != nil {
				t.Error(err)
				return
			}
			answers[i] = response{status: res.StatusCode, header: res.Header, body: b}
		})
	}
	close(release)
	wg.Wait()
	return answers
}

// expectOneWinner fails the test unless exactly one answer is 200 and all
// the others 409.
func expectOneWinner(t *testing.T, answers []response) {
	t.Helper()
	won, conflicts := 0, 0
	codes := make([]int, len(answers))
	for i, a := range answers {
		codes[i] = a.status
		switch a.status {
		case http.StatusOK:
			won++
		case http.StatusConflict:
			conflicts++
		}
	}
	if won != 1 || conflicts != len(answers)-1 {
		t.Fatalf("%d won and %d conflicts of %d: %v", won, conflicts, len(answers), codes)
	}
}
