package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/catalog"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
	"github.com/parleyhq/parley/internal/tools"
)

// fakeKeyEnv names the variable the fake model's API key is read from.
const fakeKeyEnv = "FAKE_OPENAI_KEY"

// liveConfig has one model, "fake", served by the OpenAI-compatible fake at
// fakeURL.
func liveConfig(fakeURL string) *config.Config {
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "fake", Provider: "openai", Model: "gpt-test", BaseURL: fakeURL, APIKeyEnv: fakeKeyEnv}}
	cfg.DefaultModel = "fake"
	return &cfg
}

// newLive starts an API on SQLite with a real engine behind it, whose model
// is the fake.
func newLive(t *testing.T, fake *llmtest.OpenAIChat, opts ...func(*setup)) *server {
	t.Helper()
	s := newSQLite(t, append([]func(*setup){func(su *setup) { su.cfg = liveConfig(fake.URL) }}, opts...)...)
	s.live = true
	runEngine(t, s)
	return s
}

// runEngine runs an engine over the server's store and pubsub until the
// test ends, with the server's models built as `parley serve` builds them.
// Its poll interval is long: in these tests workers are woken by pubsub
// only, so they pick a chat up after the events of the change that made it
// pending. tune, if any, changes the engine's settings first.
func runEngine(t *testing.T, s *server, tune ...func(*engine.Config)) {
	t.Helper()
	models, err := catalog.New(s.cfg, func(string) string { return "test-key" }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{
		Concurrency:  4,
		LeaseTTL:     5 * time.Second,
		Heartbeat:    100 * time.Millisecond,
		PollInterval: time.Hour,
		MaxSteps:     5,
		Retry:        llm.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond},
		DeltaFlush:   time.Millisecond,
		Files:        s.st,
	}
	for _, f := range tune {
		f(&cfg)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	var tl engine.Tools
	if s.reg != nil {
		tl = tools.NewDispatcher(s.reg, tools.Options{}, nil)
	}
	e := engine.New(cfg, s.st, s.ps, models, tl, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	// Registered after the server's cleanups, so it runs before them: the
	// engine hands its chats back while the store is open.
	t.Cleanup(func() { cancel(); <-done })
}

// postText sends a user message to a chat.
func (s *server) postText(tok, id, text string) {
	s.t.Helper()
	s.do("POST", "/api/v1/chats/"+id+"/messages", tok, map[string]any{"content": text}).expect(s.t, http.StatusAccepted, nil)
}

// chatSSE reads a chat's stream.
type chatSSE struct{ *sseReader }

// streamOpts are how a chat stream is opened.
type streamOpts struct {
	query       string // appended to the path, like "?after=3"
	lastEventID string // the Last-Event-ID header, if not ""
	paused      bool   // read nothing until resume is called
}

// openChat opens GET /chats/{id}/stream, checks the answer's headers and
// returns the stream once the server has answered (it has subscribed then).
func (s *server) openChat(tok, id string, o streamOpts) (*chatSSE, func()) {
	s.t.Helper()
	var header map[string]string
	if o.lastEventID != "" {
		header = map[string]string{"Last-Event-ID": o.lastEventID}
	}
	r, resume := s.openSSE("/api/v1/chats/"+id+"/stream"+o.query, tok, header, o.paused)
	return &chatSSE{r}, resume
}

// watchChat opens a chat's stream and reads it at once.
func (s *server) watchChat(tok, id string, o streamOpts) *chatSSE {
	s.t.Helper()
	st, _ := s.openChat(tok, id, o)
	return st
}

// until returns the events up to and including the first for which stop
// is true.
func (st *chatSSE) until(stop func(sseEv) bool) []sseEv {
	st.t.Helper()
	var evs []sseEv
	for {
		ev := st.item()
		evs = append(evs, ev)
		if stop(ev) {
			return evs
		}
	}
}

// untilStatus returns the events up to and including a status event whose
// status is one of want.
func (st *chatSSE) untilStatus(want ...chat.Status) []sseEv {
	st.t.Helper()
	return st.until(func(ev sseEv) bool {
		if ev.Event != events.KindStatus {
			return false
		}
		got := decodeAs[statusData](st.t, ev).Status
		for _, w := range want {
			if got == w {
				return true
			}
		}
		return false
	})
}

// The data of each chat stream event (docs/api.md, "Events").
type (
	statusData struct {
		Status chat.Status `json:"status"`
		Chat   chat.Chat   `json:"chat"`
	}
	messageData struct {
		Message chat.Message `json:"message"`
	}
	partData struct {
		MessageID int64        `json:"message_id"`
		Part      events.Delta `json:"part"`
	}
	actionData struct {
		ToolCalls []chat.ToolCall `json:"tool_calls"`
		Deadline  time.Time       `json:"deadline"`
	}
	errorData struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
)

// decodeAs decodes an event's data, strictly: a field the type does not
// know fails the test.
func decodeAs[T any](t *testing.T, ev sseEv) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(ev.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s event: data %s: %v", ev.Event, ev.Data, err)
	}
	return v
}

// expectEvent reads the next event and checks its name.
func (st *chatSSE) expectEvent(kind string) sseEv {
	st.t.Helper()
	ev := st.item()
	if ev.Event != kind {
		st.t.Fatalf("got %s event %s, want %s", ev.Event, ev.Data, kind)
	}
	return ev
}

// expectStatus reads the next event: the status of the chat.
func (st *chatSSE) expectStatus(id string, want chat.Status) {
	st.t.Helper()
	d := decodeAs[statusData](st.t, st.expectEvent(events.KindStatus))
	if d.Status != want || d.Chat.Status != want || d.Chat.ID != id {
		st.t.Fatalf("status %s of chat %s (%s), want %s of %s", d.Status, d.Chat.ID, d.Chat.Status, want, id)
	}
}

// expectMessage reads the next event: a durable message, whose SSE id is
// its id.
func (st *chatSSE) expectMessage() chat.Message {
	st.t.Helper()
	ev := st.expectEvent(events.KindMessage)
	m := decodeAs[messageData](st.t, ev).Message
	if ev.ID != strconv.FormatInt(m.ID, 10) {
		st.t.Fatalf("message %d sent with SSE id %q", m.ID, ev.ID)
	}
	return m
}

// textOf joins the text parts of a message.
func textOf(m chat.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == chat.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// streamed sums up the part events among evs: the message id they name
// (failing if they name more than one), their text deltas joined, and how
// many there were.
func streamed(t *testing.T, evs []sseEv) (msgID int64, txt string, n int) {
	t.Helper()
	var b strings.Builder
	for _, ev := range evs {
		if ev.Event != events.KindPart {
			continue
		}
		p := decodeAs[partData](t, ev)
		if msgID != 0 && p.MessageID != msgID {
			t.Fatalf("part events of messages %d and %d in one step", msgID, p.MessageID)
		}
		msgID = p.MessageID
		if p.Part.Type == events.DeltaText {
			b.WriteString(p.Part.Text)
		}
		n++
	}
	return msgID, b.String(), n
}

// messagesIn returns the message events among evs.
func messagesIn(t *testing.T, evs []sseEv) []chat.Message {
	t.Helper()
	var msgs []chat.Message
	for _, ev := range evs {
		if ev.Event == events.KindMessage {
			msgs = append(msgs, decodeAs[messageData](t, ev).Message)
		}
	}
	return msgs
}

// kinds lists the event names of evs, for failure messages.
func kinds(evs []sseEv) string {
	names := make([]string, len(evs))
	for i, ev := range evs {
		names[i] = ev.Event
	}
	return strings.Join(names, ",")
}

// newLivePostgres starts one replica on the database of dsn, with its own
// store pool and LISTEN connection on channel, whose model is the fake; no
// engine unless the test runs one (runEngine).
func newLivePostgres(t *testing.T, dsn, channel string, fake *llmtest.OpenAIChat) *server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, ps := pgtest.Replica(t, dsn, channel, log)
	s := start(t, st, ps, setup{cfg: liveConfig(fake.URL), keepAlive: time.Hour})
	s.live = true
	return s
}
