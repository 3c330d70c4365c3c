package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/poll"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
	"github.com/parleyhq/parley/internal/webhook"
)

// waitFor is how long a test waits for what a deliverer does.
const waitFor = 10 * time.Second

// env is a store with an owner "alice" and a chat of hers.
type env struct {
	t    *testing.T
	st   store.Store
	chat chat.Chat
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st := sqlitetest.Open(t, t.TempDir())
	e := &env{t: t, st: st}
	e.tx(func(tx store.Tx) error {
		if _, err := tx.CreateOwner(t.Context(), "alice"); err != nil {
			return err
		}
		e.chat = chat.Chat{ID: "7e0c7b5e-53a5-4bde-9e7e-1d3f3f0f3b01", Owner: "alice", Model: "echo", Status: chat.Waiting, Title: "first"}
		return tx.InsertChat(t.Context(), &e.chat)
	})
	return e
}

func (e *env) tx(fn func(tx store.Tx) error) {
	e.t.Helper()
	if err := e.st.InTx(context.Background(), fn); err != nil {
		e.t.Fatal(err)
	}
}

// endpoint creates an endpoint of alice's at url.
func (e *env) endpoint(url string, events ...string) store.WebhookEndpoint {
	e.t.Helper()
	if len(events) == 0 {
		events = []string{store.EventAll}
	}
	ep := store.WebhookEndpoint{ID: webhook.NewEndpointID(), Owner: "alice", URL: url, Events: events, Secret: webhook.NewSecret()}
	if err := e.st.CreateWebhook(context.Background(), &ep, 0); err != nil {
		e.t.Fatal(err)
	}
	return ep
}

// move changes the chat's status.
func (e *env) move(to chat.Status) {
	e.t.Helper()
	e.tx(func(tx store.Tx) error {
		c, err := tx.TransitionChat(context.Background(), e.chat.ID, store.Transition{From: e.chat.Status, To: to,
			LastError: &chat.ChatError{Kind: "provider", Message: "boom"}, ActionTimeout: time.Minute})
		e.chat = c
		return err
	})
}

// deliveries lists an endpoint's deliveries, newest first.
func (e *env) deliveries(id string) []store.WebhookDelivery {
	e.t.Helper()
	page, err := e.st.ListDeliveries(context.Background(), "alice", id, "", 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return page.Deliveries
}

// waitDelivery waits until the endpoint's oldest delivery satisfies ok.
func (e *env) waitDelivery(id string, what string, ok func(store.WebhookDelivery) bool) store.WebhookDelivery {
	e.t.Helper()
	deadline := time.Now().Add(waitFor)
	var pause poll.Backoff
	for {
		ds := e.deliveries(id)
		if len(ds) > 0 && ok(ds[len(ds)-1]) {
			return ds[len(ds)-1]
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no delivery %s after %v: %+v", what, waitFor, ds)
		}
		pause.Sleep()
	}
}

// run starts a deliverer over the env's store until the test ends.
func (e *env) run(cfg webhook.Config) *webhook.Deliverer {
	e.t.Helper()
	cfg.Store = e.st
	if cfg.WorkerID == "" {
		cfg.WorkerID = "test-deliverer"
	}
	if cfg.PubSub == nil {
		ps := memory.New()
		e.t.Cleanup(func() { ps.Close() })
		cfg.PubSub = ps
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	d, err := webhook.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return d
}

// received is one request a receiver got and verified.
type received struct {
	header http.Header
	body   []byte
	msg    struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	data webhook.Data
}

// receiver is an endpoint that verifies every request with the Standard
// Webhooks library, against each of its secrets, and answers with
// answer(n) for the n-th request (from 1).
type receiver struct {
	*httptest.Server
	t       *testing.T
	mu      sync.Mutex
	secrets []string
	got     []received
	arrived chan received
	answer  func(n int, w http.ResponseWriter)
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter)) *receiver {
	r := &receiver{t: t, arrived: make(chan received, 100), answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

// verifyWith sets the secrets every request must verify with, each alone.
func (r *receiver) verifyWith(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = secrets
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		r.t.Errorf("read request: %v", err)
		return
	}
	r.mu.Lock()
	secrets := r.secrets
	r.mu.Unlock()
	if len(secrets) == 0 {
		r.t.Errorf("receiver without secrets")
	}
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			r.t.Errorf("secret %q: %v", s, err)
			continue
		}
		if err := wh.Verify(body, req.Header); err != nil {
			r.t.Errorf("request does not verify with %.12s...: %v (headers %v)", s, err, req.Header)
		}
	}
	rc := received{header: req.Header.Clone(), body: body}
	if err := json.Unmarshal(body, &rc.msg); err != nil {
		r.t.Errorf("body %s: %v", body, err)
	}
	if err := json.Unmarshal(rc.msg.Data, &rc.data); err != nil {
		r.t.Errorf("data %s: %v", rc.msg.Data, err)
	}
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		r.t.Errorf("%s with Content-Type %q", req.Method, req.Header.Get("Content-Type"))
	}
	r.mu.Lock()
	r.got = append(r.got, rc)
	n := len(r.got)
	r.mu.Unlock()
	r.arrived <- rc
	if r.answer != nil {
		r.answer(n, w)
	} else {
		w.WriteHeader(http.StatusNoContent)
	}
}

// next waits for the next request.
func (r *receiver) next() received {
	r.t.Helper()
	select {
	case rc := <-r.arrived:
		return rc
	case <-time.After(waitFor):
		r.t.Fatalf("no request after %v", waitFor)
		return received{}
	}
}

// count is how many requests arrived.
func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// status answers code.
func status(code int) func(int, http.ResponseWriter) {
	return func(_ int, w http.ResponseWriter) { w.WriteHeader(code) }
}

// private lets deliveries reach the receivers (on 127.0.0.1).
var private = webhook.Policy{AllowPrivate: true}

// short is a retry schedule for tests.
func short(n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = time.Millisecond
	}
	return s
}

// noJitter waits the scheduled delays exactly.
func noJitter(d time.Duration) time.Duration { return d }
