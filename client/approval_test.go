package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/testutil/poll"
)

// These tests run Decide and the runner's approvals against the real server
// of newToolServer. Their chats make one step of three calls: a dynamic
// tool (get_weather) and two built-in tools they ask approval of
// (current_time, http_fetch; the latter is always denied, so nothing is
// fetched).

// threeCalls is the message whose step calls get_weather, current_time and
// http_fetch, and approveBoth asks approval of the last two.
const threeCalls = "/call get_weather {\"city\":\"Paris\"}\n/call current_time {}\n/call http_fetch {\"url\":\"https://example.com\"}"

var approveBoth = []string{"current_time", "http_fetch"}

// waitChat polls the chat until ok holds.
func waitChat(t *testing.T, c *client.Client, id string, ok func(client.Chat) bool) client.Chat {
	t.Helper()
	deadline := time.Now().Add(wait)
	var pause poll.Backoff
	for {
		ch, err := c.GetChat(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(ch) {
			return ch
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat %s is %s with required_action %+v", id, ch.Status, ch.RequiredAction)
		}
		pause.Sleep()
	}
}

// waitsFor reports whether a chat waits for exactly the calls ids.
func waitsFor(ids ...string) func(client.Chat) bool {
	return func(ch client.Chat) bool {
		if ch.Status != client.StatusRequiresAction || ch.RequiredAction == nil || len(ch.RequiredAction.ToolCalls) != len(ids) {
			return false
		}
		for i, call := range ch.RequiredAction.ToolCalls {
			if call.ToolCallID != ids[i] {
				return false
			}
		}
		return true
	}
}

// checkDenied checks that the history denies callID (a tool-decision part
// by alice with the reason, then the error result "denied: reason").
func checkDenied(t *testing.T, c *client.Client, chatID, callID, tool, reason string) {
	t.Helper()
	h := historyOf(t, c, chatID, callID)
	if d := h.decision; h.decisions != 1 || d.Decision == nil || d.ToolName != tool || d.Decision.Approved ||
		d.Decision.Reason != reason || d.Decision.DecidedBy != "alice" || d.Args != nil {
		t.Errorf("%s: %d tool-decision parts, the last %+v %+v; want one denial by alice, reason %q", tool, h.decisions, d, d.Decision, reason)
	}
	if want, _ := json.Marshal("denied: " + reason); !h.result.IsError || string(h.result.Output) != string(want) {
		t.Errorf("%s: result %+v, want the error %s", tool, h.result, want)
	}
}

// logGate is a log handler that counts the records whose message contains
// match, and closes c at the first.
type logGate struct {
	match string
	n     *atomic.Int64
	once  *sync.Once
	c     chan struct{}
}

func newLogGate(match string) logGate {
	return logGate{match: match, n: new(atomic.Int64), once: new(sync.Once), c: make(chan struct{})}
}

func (g logGate) Enabled(context.Context, slog.Level) bool { return true }
func (g logGate) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g logGate) WithGroup(string) slog.Handler            { return g }
func (g logGate) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, g.match) {
		g.n.Add(1)
		g.once.Do(func() { close(g.c) })
	}
	return nil
}

// await waits for c to close, or fails the test after wait.
func await(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(wait):
		t.Fatalf("waited %v for %s", wait, what)
	}
}

// TestDecisionJSON: the decision builders and the body Decide posts.
func TestDecisionJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    client.Decision
		want string
	}{
		{client.Approve("c1"), `{"tool_call_id":"c1","approve":true}`},
		{client.ApproveWithArgs("c1", json.RawMessage(`{"path":"x"}`)), `{"tool_call_id":"c1","approve":true,"args":{"path":"x"}}`},
		{client.Deny("c1", "not now"), `{"tool_call_id":"c1","approve":false,"reason":"not now"}`},
		{client.Deny("c1", ""), `{"tool_call_id":"c1","approve":false}`},
	} {
		if b, err := json.Marshal(c.d); err != nil || string(b) != c.want {
			t.Errorf("%+v encodes as %s (%v), want %s", c.d, b, err, c.want)
		}
	}
}

// TestDecide: the decisions on every pending approval in one POST; the
// server's 400s (ids, edited args) change nothing and name the problem; a
// second POST is a 409; the tool results of the same step are posted apart,
// and the chat runs on once both are in.
func TestDecide(t *testing.T) {
	t.Parallel()
	s := newToolServer(t)
	c, ctx := s.client(), testCtx(t)
	created, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: []client.DynamicTool{weatherTool}, Approve: approveBoth, Message: threeCalls})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID

	ch := waitStatus(t, c, id, client.StatusRequiresAction)
	if ch.RequiredAction == nil || len(ch.RequiredAction.ToolCalls) != 3 {
		t.Fatalf("required_action %+v", ch.RequiredAction)
	}
	calls := ch.RequiredAction.ToolCalls
	weather, clock, fetch := calls[0].ToolCallID, calls[1].ToolCallID, calls[2].ToolCallID
	if got := calls[1]; !got.NeedsApproval() || got.ToolName != "current_time" || got.Source != "builtin" ||
		!strings.Contains(got.Description, "current date and time") || calls[0].NeedsApproval() || !calls[2].NeedsApproval() {
		t.Errorf("calls %+v", calls)
	}

	_, err = c.Decide(ctx, id, []client.Decision{client.Approve(clock), client.Approve(clock), client.Approve("c9")})
	ae := apiError(t, err, 400, "invalid_decisions")
	if !strings.Contains(ae.Message, "missing decisions for "+fetch) || !strings.Contains(ae.Message, "unknown tool call ids c9") ||
		!strings.Contains(ae.Message, "duplicate tool call ids "+clock) {
		t.Errorf("ids: %v", err)
	}
	if d := ae.Details; !slices.Equal(anyStrings(d["missing"]), []string{fetch}) || !slices.Equal(anyStrings(d["unknown"]), []string{"c9"}) ||
		!slices.Equal(anyStrings(d["duplicate"]), []string{clock}) {
		t.Errorf("ids: details %v", d)
	}
	_, err = c.Decide(ctx, id, []client.Decision{client.ApproveWithArgs(clock, json.RawMessage(`{"timezone":5}`)), client.Deny(fetch, "")})
	if ae := apiError(t, err, 400, "invalid_args"); ae.Details["tool_call_id"] != clock {
		t.Errorf("invalid_args details %v, want the call's id", ae.Details)
	}
	if _, err = c.Decide(ctx, id, nil); !client.IsStatus(err, 400) {
		t.Errorf("no decisions: %v, want a 400 naming the missing ids", err)
	}
	for _, callID := range []string{clock, fetch} {
		if h := historyOf(t, c, id, callID); h.decisions != 0 || h.result.Type != "" {
			t.Errorf("after the refused POSTs, the history of %s holds %+v, want nothing", callID, h)
		}
	}

	ch, err = c.Decide(ctx, id, []client.Decision{client.ApproveWithArgs(clock, json.RawMessage(`{"timezone":"Asia/Tokyo"}`)), client.Deny(fetch, "keep it")})
	if err != nil {
		t.Fatal(err)
	}
	if !waitsFor(weather)(ch) {
		t.Errorf("after the decisions the chat still waits for %s alone: %+v %+v", weather, ch.Status, ch.RequiredAction)
	}
	_, err = c.Decide(ctx, id, []client.Decision{client.Approve(clock), client.Approve(fetch)})
	if ae := apiError(t, err, 409, "status_conflict"); ae.Details["status"] != client.StatusRequiresAction {
		t.Errorf("second POST: details %v", ae.Details)
	}
	if ch, err = c.SubmitToolResults(ctx, id, []client.ToolResult{client.TextResult(weather, "sunny")}); err != nil || ch.Status != client.StatusPending {
		t.Fatalf("tool results: %v, chat %s", err, ch.Status)
	}
	if _, err = c.Decide(ctx, id, []client.Decision{client.Approve(clock), client.Approve(fetch)}); !client.IsStatus(err, 409) {
		t.Errorf("POST once the chat runs on: %v, want 409", err)
	}

	waitStatus(t, c, id, client.StatusWaiting)
	h := historyOf(t, c, id, clock)
	checkDecision(t, h, true, "", `{"timezone":"Asia/Tokyo"}`)
	if h.result.IsError || !strings.Contains(string(h.result.Output), `"timezone":"Asia/Tokyo"`) {
		t.Errorf("current_time result %+v, want the time in Asia/Tokyo", h.result)
	}
	checkDenied(t, c, id, fetch, "http_fetch", "keep it")
}

// anyStrings is a JSON array of strings, decoded into []any, as strings.
func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// TestRunnerApprovals: a step with a dynamic tool call and two approvals;
// the handler runs once, the approver once per call, and the runner posts
// the results and all the decisions, each once, although the chat is
// announced again after the decisions: the handler, which holds the results
// until then, cuts the runner's feed, and the runner's listing after the
// reconnection shows the chat waiting for the call being handled.
func TestRunnerApprovals(t *testing.T) {
	t.Parallel()
	s := newToolServer(t)
	c, ctx := s.client(), testCtx(t)

	var (
		mu        sync.Mutex
		cutFeed   func()          // ends the runner's feed
		relist    bool            // the next listing is the one after the cut
		relisting client.ChatPage // what it answered, once relisted is closed
		relisted  = make(chan struct{})
	)
	s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case r.URL.Path == "/api/v1/chats/watch":
			ctx, cancel := context.WithCancel(r.Context())
			mu.Lock()
			cutFeed = cancel
			mu.Unlock()
			s.api.ServeHTTP(w, r.WithContext(ctx))
			return true
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/chats":
			mu.Lock()
			after := relist
			relist = false
			mu.Unlock()
			if !after {
				return false
			}
			rec := httptest.NewRecorder()
			s.api.ServeHTTP(rec, r)
			if err := json.Unmarshal(rec.Body.Bytes(), &relisting); err != nil {
				t.Errorf("the listing after the cut: %v", err)
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			close(relisted)
			return true
		}
		return false
	})

	submitted := newLogGate("runner: decisions submitted")
	var asked atomic.Int64
	handled := map[string]int{} // city -> runs, under mu
	seen := map[string]client.ToolCall{}
	var chats []string // of the approver's calls, under mu
	r := client.NewRunner(c, client.WithLogger(slog.New(submitted)), client.WithApprover(func(ctx context.Context, ch client.Chat, call client.ToolCall) (client.Decision, error) {
		asked.Add(1)
		mu.Lock()
		seen[call.ToolName] = call
		chats = append(chats, ch.ID)
		mu.Unlock()
		if _, ok := ctx.Deadline(); !ok {
			return client.Decision{}, errors.New("no deadline on the approver's context")
		}
		if call.ToolName == "current_time" {
			return client.ApproveWithArgs("ignored: the runner sets the id", json.RawMessage(`{"timezone":"Asia/Tokyo"}`)), nil
		}
		return client.Deny(call.ToolCallID, "read-only today"), nil
	}))
	client.Handle(r, "get_weather", "", func(ctx context.Context, in weatherIn) (weatherOut, error) {
		mu.Lock()
		handled[in.City]++
		mu.Unlock()
		if in.City != "Paris" {
			return weatherOut{City: in.City, TempC: 8}, nil
		}
		// The decisions, then the chat announced again, before the results.
		select {
		case <-submitted.c:
		case <-ctx.Done():
			return weatherOut{}, ctx.Err()
		}
		mu.Lock()
		relist = true
		cutFeed()
		mu.Unlock()
		select {
		case <-relisted:
		case <-ctx.Done():
			return weatherOut{}, ctx.Err()
		}
		return weatherOut{City: in.City, TempC: 21}, nil
	})
	stop := run(t, r)

	ch, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: r.Tools(), Approve: approveBoth, Message: threeCalls})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)

	// The listing after the cut announced the chat again, waiting for the
	// get_weather call the handler was answering.
	await(t, relisted, "the runner's listing after its feed was cut")
	page := relisting
	got := map[string]client.Part{} // tool -> its result
	for _, p := range results(t, c, ch.ID) {
		got[p.ToolName] = p
	}
	if len(got) != 3 || got["get_weather"].Type == "" || got["current_time"].Type == "" || got["http_fetch"].Type == "" {
		t.Fatalf("results %+v, want one of get_weather, current_time and http_fetch each", got)
	}
	weather := got["get_weather"].ToolCallID
	if i := slices.IndexFunc(page.Chats, func(x client.Chat) bool { return x.ID == ch.ID }); i < 0 || !waitsFor(weather)(page.Chats[i]) {
		t.Errorf("the listing after the cut %+v, want the chat waiting for %s alone", page.Chats, weather)
	}
	// A chat that starts waiting after the listing: once the runner
	// answered it, it had dispatched what the listing announced.
	later, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: r.Tools(), Message: `/call get_weather {"city":"Oslo"}`})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, later.ID, client.StatusWaiting)
	if err := stop(); err != nil { // waits for the handlers and the approver
		t.Fatal(err)
	}

	if p := got["get_weather"]; p.IsError || string(p.Output) != `{"city":"Paris","temp_c":21}` {
		t.Errorf("get_weather result %+v", p)
	}
	clock, fetch := got["current_time"].ToolCallID, got["http_fetch"].ToolCallID
	checkDecision(t, historyOf(t, c, ch.ID, clock), true, "", `{"timezone":"Asia/Tokyo"}`)
	if p := got["current_time"]; p.IsError || !strings.Contains(string(p.Output), `"timezone":"Asia/Tokyo"`) {
		t.Errorf("current_time result %+v, want the time in Asia/Tokyo", p)
	}
	checkDenied(t, c, ch.ID, fetch, "http_fetch", "read-only today")
	if na, nr := len(s.requestsTo("/api/v1/chats/"+ch.ID+"/approvals")), len(s.requestsTo("/api/v1/chats/"+ch.ID+"/tool-results")); na != 1 || nr != 1 {
		t.Errorf("%d POST /approvals and %d POST /tool-results, want one each", na, nr)
	}
	mu.Lock()
	defer mu.Unlock()
	if handled["Paris"] != 1 || handled["Oslo"] != 1 || asked.Load() != 2 {
		t.Errorf("handler ran %v (want once per city), approver asked %d times (want 2)", handled, asked.Load())
	}
	if len(chats) != 2 || chats[0] != ch.ID || chats[1] != ch.ID {
		t.Errorf("the approver got the chats %q, want %s twice", chats, ch.ID)
	}
	if d := seen["current_time"]; d.ToolCallID != clock || d.Source != "builtin" || !strings.Contains(d.Description, "current date and time") || string(d.Args) != `{}` {
		t.Errorf("the approver got %+v", d)
	}
}

// TestRunnerLeavesApprovals: without an approver, the runner posts the
// results of the dynamic tool calls and leaves the approvals pending; an
// approver that fails decides nothing.
func TestRunnerLeavesApprovals(t *testing.T) {
	t.Parallel()
	s := newToolServer(t)
	c, ctx := s.client(), testCtx(t)
	r := client.NewRunner(c)
	client.Handle(r, "get_weather", "", func(ctx context.Context, in weatherIn) (weatherOut, error) {
		return weatherOut{City: in.City}, nil
	})
	stop := run(t, r)
	ch1, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: r.Tools(), Approve: []string{"current_time"},
		Message: "/call get_weather {\"city\":\"Paris\"}\n/call current_time {}"})
	if err != nil {
		t.Fatal(err)
	}
	waitChat(t, c, ch1.ID, func(ch client.Chat) bool {
		return ch.Status == client.StatusRequiresAction && len(results(t, c, ch1.ID)) == 1
	})
	if ch := waitStatus(t, c, ch1.ID, client.StatusRequiresAction); len(ch.RequiredAction.ToolCalls) != 1 || ch.RequiredAction.ToolCalls[0].ToolName != "current_time" {
		t.Errorf("required_action %+v, want the approval alone", ch.RequiredAction)
	}

	var asked atomic.Int64
	refused := newLogGate("leaving the step undecided")
	r2 := client.NewRunner(c, client.WithLogger(slog.New(refused)),
		client.WithChatFilter(func(ch client.Chat) bool { return ch.Labels["runner"] == "r2" }),
		client.WithApprover(func(ctx context.Context, ch client.Chat, call client.ToolCall) (client.Decision, error) {
			if asked.Add(1) == 1 {
				return client.Decision{}, errors.New("the approval service is down")
			}
			return client.Approve(call.ToolCallID), nil
		}))
	stop2 := run(t, r2)
	ch2, err := c.CreateChat(ctx, client.CreateChatRequest{Labels: map[string]string{"runner": "r2"}, Approve: approveBoth,
		Message: "/call current_time {}\n/call http_fetch {\"url\":\"https://example.com\"}"})
	if err != nil {
		t.Fatal(err)
	}
	await(t, refused.c, "the runner to give up on the step")
	if err := stop2(); err != nil { // waits for the approver
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("approver asked %d times, want once (its error ends the step's decisions)", n)
	}
	for _, id := range []string{ch1.ID, ch2.ID} {
		if n := len(s.requestsTo("/api/v1/chats/" + id + "/approvals")); n != 0 {
			t.Errorf("%d POST /approvals to chat %s, want none", n, id)
		}
	}
	if ch := waitStatus(t, c, ch2.ID, client.StatusRequiresAction); len(ch.RequiredAction.ToolCalls) != 2 {
		t.Errorf("required_action %+v, want both approvals still pending", ch.RequiredAction)
	}
}

// TestRunnersRaceApprovals: two runners decide on the same step; the first
// POST wins, the other gets a 409, which it logs as a lost race.
func TestRunnersRaceApprovals(t *testing.T) {
	t.Parallel()
	s := newToolServer(t)
	c, ctx := s.client(), testCtx(t)
	var (
		lost    = newLogGate("another runner answered first")
		arrived atomic.Int64
		both    = make(chan struct{})
		stops   []func() error
	)
	for _, name := range []string{"a", "b"} {
		log := slog.New(lost)
		r := client.NewRunner(c, client.WithLogger(log), client.WithApprover(func(ctx context.Context, ch client.Chat, call client.ToolCall) (client.Decision, error) {
			if arrived.Add(1) == 2 {
				close(both)
			}
			select {
			case <-both:
			case <-ctx.Done():
				return client.Decision{}, ctx.Err()
			}
			return client.Deny(call.ToolCallID, "runner "+name), nil
		}))
		stops = append(stops, run(t, r))
	}
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Approve: []string{"current_time"}, Message: "/call current_time {}"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	await(t, lost.c, "the lost race's log record")
	for _, stop := range stops {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	if n := lost.n.Load(); n != 1 {
		t.Errorf("%d lost races logged, want 1", n)
	}
	if n := len(s.requestsTo("/api/v1/chats/" + ch.ID + "/approvals")); n != 2 {
		t.Errorf("%d POST /approvals, want one per runner", n)
	}
	got := results(t, c, ch.ID)
	if len(got) != 1 {
		t.Fatalf("results %+v, want one", got)
	}
	h := historyOf(t, c, ch.ID, got[0].ToolCallID)
	if h.decisions != 1 || h.decision.Decision == nil || (h.decision.Decision.Reason != "runner a" && h.decision.Decision.Reason != "runner b") {
		t.Errorf("%d tool-decision parts, the last %+v; want the first POST's alone", h.decisions, h.decision)
	}
	checkDenied(t, c, ch.ID, got[0].ToolCallID, "current_time", h.decision.Decision.Reason)
}
