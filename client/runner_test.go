package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
)

type weatherIn struct {
	City string `json:"city" jsonschema:"description=The city"`
	Unit string `json:"unit,omitempty" jsonschema:"enum=c,enum=f"`
}

type weatherOut struct {
	City  string `json:"city"`
	TempC int    `json:"temp_c"`
}

// run starts r until the test ends and returns what Run returned, once it
// did.
func run(t *testing.T, r *client.Runner) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(wait):
				err = errors.New("Run did not return after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// results returns every tool-result part of a chat's history.
func results(t *testing.T, c *client.Client, id string) []client.Part {
	t.Helper()
	msgs, err := c.AllMessages(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []client.Part
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == client.PartToolResult {
				out = append(out, p)
			}
		}
	}
	return out
}

// lastAnswer is the text of the chat's last assistant message.
func lastAnswer(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	msgs, err := c.AllMessages(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == client.RoleAssistant {
			return msgs[i].Text()
		}
	}
	return ""
}

func TestHandleDerivesSchema(t *testing.T) {
	t.Parallel()
	r := client.NewRunner(client.New("http://127.0.0.1:1", ""))
	client.Handle(r, "get_weather", "Current weather", func(ctx context.Context, in weatherIn) (weatherOut, error) {
		return weatherOut{}, nil
	})
	tools := r.Tools()
	if len(tools) != 1 || tools[0].Name != "get_weather" || tools[0].Description != "Current weather" {
		t.Fatalf("tools %+v", tools)
	}
	var schema map[string]any
	if err := json.Unmarshal(tools[0].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{"city":{"description":"The city","type":"string"},"unit":{"enum":["c","f"],"type":"string"}},"required":["city"],"type":"object"}`
	if got, _ := json.Marshal(schema); string(got) != want {
		t.Errorf("schema\n%s\nwant\n%s", got, want)
	}

	for name, register := range map[string]func(){
		"duplicate": func() {
			client.Handle(r, "get_weather", "", func(context.Context, weatherIn) (int, error) { return 0, nil })
		},
		"invalid name": func() {
			client.Handle(r, "get weather", "", func(context.Context, weatherIn) (int, error) { return 0, nil })
		},
		"not an object": func() {
			client.Handle(r, "count", "", func(context.Context, []string) (int, error) { return 0, nil })
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Handle did not panic", name)
				}
			}()
			register()
		}()
	}
}

// TestRunnerAnswersCalls: a chat whose step calls two dynamic tools: the
// runner runs both handlers at once (each waits for the other), the
// handler's error becomes an error result, and the chat answers with both.
func TestRunnerAnswersCalls(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	var both sync.WaitGroup
	both.Add(2)
	together := func(ctx context.Context) error {
		both.Done()
		done := make(chan struct{})
		go func() { both.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-time.After(wait):
			return errors.New("the other handler did not run at the same time")
		}
	}
	r := client.NewRunner(c)
	client.Handle(r, "get_weather", "Current weather", func(ctx context.Context, in weatherIn) (weatherOut, error) {
		if err := together(ctx); err != nil {
			return weatherOut{}, err
		}
		return weatherOut{City: in.City, TempC: 21}, nil
	})
	client.Handle(r, "book_table", "Books a table", func(ctx context.Context, in struct {
		People int `json:"people"`
	}) (string, error) {
		if err := together(ctx); err != nil {
			return "", err
		}
		return "", fmt.Errorf("no table for %d", in.People)
	})
	stop := run(t, r)

	ch, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: r.Tools(),
		Message: "/call get_weather {\"city\":\"Paris\"}\n/call book_table {\"people\":4}"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	got := results(t, c, ch.ID)
	if len(got) != 2 || got[0].ToolName != "get_weather" || got[0].IsError || string(got[0].Output) != `{"city":"Paris","temp_c":21}` ||
		got[1].ToolName != "book_table" || !got[1].IsError || string(got[1].Output) != `"no table for 4"` {
		t.Fatalf("results %+v", got)
	}
	if a, want := lastAnswer(t, c, ch.ID), "tool get_weather returned {\"city\":\"Paris\",\"temp_c\":21}\ntool book_table failed: no table for 4"; a != want {
		t.Errorf("answer %q, want %q", a, want)
	}
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil after its context ended", err)
	}
}

// TestRunnerPicksUpWaitingChats: a chat that waits for results before the
// runner starts is answered when it starts; so is a call of a tool the
// runner does not know, with an error result.
func TestRunnerPicksUpWaitingChats(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	r := client.NewRunner(c)
	client.Handle(r, "get_weather", "", func(ctx context.Context, in weatherIn) (weatherOut, error) {
		return weatherOut{City: in.City, TempC: 5}, nil
	})
	other := client.DynamicTool{Name: "other", InputSchema: json.RawMessage(`{"type":"object"}`)}
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: append(r.Tools(), other),
		Message: "/call get_weather {\"city\":\"Oslo\"}\n/call other {}"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusRequiresAction)

	run(t, r)
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	got := results(t, c, ch.ID)
	if len(got) != 2 || got[0].IsError || string(got[0].Output) != `{"city":"Oslo","temp_c":5}` ||
		!got[1].IsError || !strings.Contains(string(got[1].Output), `unknown tool \"other\"`) {
		t.Fatalf("results %+v", got)
	}
}

// TestRunnersRace: two runners serve the same owner; in each chat both run
// the handler (a barrier holds each call until both runners have it), both
// submit, the server takes one: every call has exactly one result, and the
// loser logs its 409 as a lost race and keeps running.
func TestRunnersRace(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	const chats = 5
	var (
		mu      sync.Mutex
		arrived = map[string]chan struct{}{} // args -> closed when both runners have the call
		counts  = map[string]int{}
		lost    atomic.Int64
	)
	handler := func(runner string) func(context.Context, weatherIn) (weatherOut, error) {
		return func(ctx context.Context, in weatherIn) (weatherOut, error) {
			mu.Lock()
			if arrived[in.City] == nil {
				arrived[in.City] = make(chan struct{})
			}
			ch := arrived[in.City]
			counts[in.City]++
			if counts[in.City] == 2 {
				close(ch)
			}
			mu.Unlock()
			select {
			case <-ch:
			case <-time.After(wait):
				return weatherOut{}, errors.New("the other runner never got this call")
			}
			return weatherOut{City: runner + ":" + in.City}, nil
		}
	}
	var runners []*client.Runner
	for _, name := range []string{"a", "b"} {
		log := slog.New(countHandler{match: "another runner answered first", n: &lost})
		r := client.NewRunner(c, client.WithLogger(log))
		client.Handle(r, "get_weather", "", handler(name))
		runners = append(runners, r)
	}
	stopA, stopB := run(t, runners[0]), run(t, runners[1])

	ids := make([]string, chats)
	for i := range chats {
		ch, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: runners[0].Tools(),
			Message: fmt.Sprintf("/call get_weather {\"city\":\"c%d\"}", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = ch.ID
	}
	for i, id := range ids {
		waitStatus(t, c, id, client.StatusWaiting)
		got := results(t, c, id)
		if len(got) != 1 || got[0].IsError || !strings.Contains(string(got[0].Output), fmt.Sprintf(`:c%d"`, i)) {
			t.Fatalf("chat %d: results %+v, want exactly one", i, got)
		}
	}
	mu.Lock()
	for city, n := range counts {
		if n != 2 {
			t.Errorf("call for %s ran %d times, want once per runner", city, n)
		}
	}
	mu.Unlock()
	// The losers' 409s: one per chat (logged after their POST answered).
	deadline := time.Now().Add(wait)
	for lost.Load() < chats && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := lost.Load(); n != chats {
		t.Errorf("%d lost races logged, want %d", n, chats)
	}
	if err := stopA(); err != nil {
		t.Errorf("runner a: %v", err)
	}
	if err := stopB(); err != nil {
		t.Errorf("runner b: %v", err)
	}
}

// countHandler counts the log records whose message contains match.
type countHandler struct {
	match string
	n     *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h countHandler) WithGroup(string) slog.Handler            { return h }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.n.Add(1)
	}
	return nil
}

// TestRunnerBadToken: Run fails at once when the server refuses it.
func TestRunnerBadToken(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	err := client.NewRunner(client.New(s.url, "prl_nope")).Run(testCtx(t))
	if !client.IsStatus(err, 401) {
		t.Errorf("Run = %v, want a 401", err)
	}
}

// TestRunnerRescansAfterReconnect: a chat that starts waiting while the
// runner's feed is down (its action_required event is lost) is answered
// once the feed is back.
func TestRunnerRescansAfterReconnect(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	r := client.NewRunner(c)
	client.Handle(r, "get_weather", "", func(ctx context.Context, in weatherIn) (weatherOut, error) {
		return weatherOut{City: in.City, TempC: 9}, nil
	})
	run(t, r)
	// The runner is up once it answers a first chat.
	first, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: r.Tools(), Message: `/call get_weather {"city":"Bern"}`})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, first.ID, client.StatusWaiting)

	arrived, release := make(chan struct{}, 1), make(chan struct{})
	s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/api/v1/chats/watch" {
			arrived <- struct{}{}
			<-release
		}
		return false
	})
	s.srv.CloseClientConnections()
	select {
	case <-arrived:
	case <-time.After(wait):
		t.Fatal("the runner's feed did not reconnect")
	}
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: r.Tools(), Message: `/call get_weather {"city":"Rome"}`})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusRequiresAction)
	s.setIntercept(nil)
	close(release)
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	if got := results(t, c, ch.ID); len(got) != 1 || string(got[0].Output) != `{"city":"Rome","temp_c":9}` {
		t.Fatalf("results %+v", got)
	}
}
