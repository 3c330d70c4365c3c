package chatcli

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/catalog"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/internal/tools/builtin"
)

// server is a parley in the test's process, as serve runs it with the
// default configuration changed by edit: the API and the engine with the
// configured models (their keys from env) and the built-in tools, on SQLite and the memory
// pubsub. Once the test ends, every chat's history is checked
// (sqlitetest.Open).
type server struct {
	url   string
	token string // alice's
	st    store.Store
}

func newServer(t *testing.T, env map[string]string, edit func(*config.Config)) *server {
	t.Helper()
	cfg := config.Default()
	cfg.Models, cfg.DefaultModel = []config.Model{{Name: "echo", Provider: "echo", Model: "echo"}}, "echo"
	if edit != nil {
		edit(&cfg)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	models, err := catalog.New(&cfg, func(k string) string { return env[k] }, log)
	if err != nil {
		t.Fatal(err)
	}
	st := sqlitetest.Open(t, t.TempDir())
	ps := memory.New()
	reg := tools.NewRegistry(log) // the built-in tools, as serve has them
	for _, tl := range builtin.Tools(builtin.Options{}) {
		if err := reg.AddTool(tl); err != nil {
			t.Fatal(err)
		}
	}
	h, err := api.New(api.Deps{Config: &cfg, Store: st, PubSub: ps, Logger: log, Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	ec := engine.DefaultConfig()
	ec.PollInterval, ec.Heartbeat, ec.DeltaFlush = 50*time.Millisecond, 100*time.Millisecond, time.Millisecond
	ec.Files = st
	eng := engine.New(ec, st, ps, models, tools.NewDispatcher(reg, tools.Options{}, log), log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		cancel()
		<-done
		ps.Close() // ends open streams, so Close does not wait for them
		srv.Close()
	})
	token, _, err := auth.Issue(context.Background(), st, "alice", "test")
	if err != nil {
		t.Fatal(err)
	}
	return &server{url: srv.URL, token: token, st: st}
}

// do sends method url with the bearer token and the JSON body ("": none),
// and returns the status and body.
func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: deadline}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp.StatusCode, string(b)
}

// newChatID matches the id a session prints when it creates a chat.
var newChatID = regexp.MustCompile(`chat ([0-9a-f-]{36})\n`)

// waitChatID waits for the id of the chat the session created.
func (p *chatProc) waitChatID() string {
	p.t.Helper()
	held, ended := p.stderr.Wait(func(text string) bool { return newChatID.MatchString(text) }, p.exited, deadline)
	switch {
	case held:
		return newChatID.FindStringSubmatch(p.stderr.String())[1]
	case ended:
		p.t.Fatalf("the session ended without naming its chat\nstderr:\n%s", p.stderr)
	default:
		p.t.Fatalf("the session named no chat\nstderr:\n%s", p.stderr)
	}
	return ""
}
