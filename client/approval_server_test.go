package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/testutil/poll"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/internal/tools/builtin"
)

// These tests run the runner's approvals against the real server: the one
// of newServer, with the built-in server-side tools registered in the API
// and in the engine. The chats ask for approval of current_time (which the
// server lets run freely), and the echo model calls it on "/call
// current_time {}".

// newToolServer is newServer with the built-in tools (current_time,
// http_fetch) on the server side.
func newToolServer(t *testing.T) *server {
	t.Helper()
	reg := tools.NewRegistry(nil)
	for _, tl := range builtin.Tools(builtin.Options{}) {
		if err := reg.AddTool(tl); err != nil {
			t.Fatal(err)
		}
	}
	return newServerWith(t, reg)
}

// approvalHistory is what the history holds of one call: its decision
// part and its result part (zero Type if none).
type approvalHistory struct {
	decision, result client.Part
	decisions        int // tool-decision parts of the call
}

// historyOf reads the chat's history for the call id.
func historyOf(t *testing.T, c *client.Client, chatID, callID string) approvalHistory {
	t.Helper()
	msgs, err := c.AllMessages(context.Background(), chatID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var h approvalHistory
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.ToolCallID != callID {
				continue
			}
			switch p.Type {
			case client.PartToolDecision:
				h.decision = p
				h.decisions++
			case client.PartToolResult:
				h.result = p
			}
		}
	}
	return h
}

// pendingApproval waits until the chat waits for a decision and returns
// the call (the only one of kind approval).
func pendingApproval(t *testing.T, c *client.Client, id string) client.ToolCall {
	t.Helper()
	ch := waitStatus(t, c, id, client.StatusRequiresAction)
	var out []client.ToolCall
	for _, call := range ch.RequiredAction.ToolCalls {
		if call.NeedsApproval() {
			out = append(out, call)
		}
	}
	if len(out) != 1 {
		t.Fatalf("required_action %+v, want one approval", ch.RequiredAction)
	}
	return out[0]
}

// checkDecision checks a tool-decision part: who decided, and what.
func checkDecision(t *testing.T, h approvalHistory, approved bool, reason, args string) {
	t.Helper()
	d := h.decision
	if h.decisions != 1 || d.Decision == nil {
		t.Fatalf("%d tool-decision parts (%+v), want one", h.decisions, d)
	}
	if d.ToolName != "current_time" || d.Decision.Approved != approved || d.Decision.Reason != reason ||
		d.Decision.DecidedBy != "alice" || d.Decision.Token != "test" || d.Decision.DecidedAt.IsZero() || string(d.Args) != args {
		t.Errorf("tool-decision %+v %+v, want approved %v, reason %q, args %q, by alice with the token test", d, *d.Decision, approved, reason, args)
	}
}

// approverFor makes an approver that records the calls it is asked about
// and answers with decide.
type approverFor struct {
	mu    sync.Mutex
	calls []client.ToolCall
	chats []string
}

func (a *approverFor) fn(decide func(call client.ToolCall) client.Decision) client.ApprovalFunc {
	return func(ctx context.Context, ch client.Chat, call client.ToolCall) (client.Decision, error) {
		a.mu.Lock()
		a.calls = append(a.calls, call)
		a.chats = append(a.chats, ch.ID)
		a.mu.Unlock()
		if _, ok := ctx.Deadline(); !ok {
			return client.Decision{}, errors.New("no deadline on the approver's context")
		}
		return decide(call), nil
	}
}

func (a *approverFor) asked() []client.ToolCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]client.ToolCall(nil), a.calls...)
}

// TestServerRunnerApproves: the runner's approver approves the call; the
// tool runs on the server, the chat ends waiting with its result, and the
// history keeps the decision before the result.
func TestServerRunnerApproves(t *testing.T) {
	t.Parallel()
	s := newToolServer(t)
	c, ctx := s.client(), testCtx(t)
	var a approverFor
	r := client.NewRunner(c, client.WithApprover(a.fn(func(call client.ToolCall) client.Decision {
		return client.Approve(call.ToolCallID)
	})))
	stop := run(t, r)

	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Approve: []string{"current_*"}, Message: "/call current_time {}"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Approve) != 1 || ch.Approve[0] != "current_*" {
		t.Errorf("chat approve %q", ch.Approve)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)

	asked := a.asked()
	if len(asked) != 1 {
		t.Fatalf("approver asked %d times, want once: %+v", len(asked), asked)
	}
	call := asked[0]
	if call.ToolName != "current_time" || call.Kind != client.ActionApproval || call.Source != "builtin" ||
		!strings.Contains(call.Description, "current date and time") || string(call.Args) != `{}` {
		t.Errorf("the approver got %+v", call)
	}
	a.mu.Lock()
	if a.chats[0] != ch.ID {
		t.Errorf("the approver got chat %s, want %s", a.chats[0], ch.ID)
	}
	a.mu.Unlock()

	h := historyOf(t, c, ch.ID, call.ToolCallID)
	checkDecision(t, h, true, "", "")
	var out struct {
		Time     string `json:"time"`
		Timezone string `json:"timezone"`
	}
	if h.result.Type == "" || h.result.IsError || json.Unmarshal(h.result.Output, &out) != nil || out.Timezone != "UTC" || out.Time == "" {
		t.Fatalf("result %+v, want current_time's", h.result)
	}
	if a := lastAnswer(t, c, ch.ID); !strings.HasPrefix(a, "tool current_time returned {") || !strings.Contains(a, `"timezone":"UTC"`) {
		t.Errorf("answer %q", a)
	}
	if n := len(s.requestsTo("/api/v1/chats/" + ch.ID + "/approvals")); n != 1 {
		t.Errorf("%d POST /approvals, want 1", n)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// TestServerRunnerDenies: the approver denies with a reason; the tool does
// not run, and its result, which the model reads, is "denied: <reason>".
func TestServerRunnerDenies(t *testing.T) {
	t.Parallel()
	s := newToolServer(t)
	c, ctx := s.client(), testCtx(t)
	var a approverFor
	r := client.NewRunner(c, client.WithApprover(a.fn(func(call client.ToolCall) client.Decision {
		return client.Deny(call.ToolCallID, "no clocks today")
	})))
	run(t, r)

	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Approve: []string{"current_time"}, Message: "/call current_time {}"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	asked := a.asked()
	if len(asked) != 1 {
		t.Fatalf("approver asked %d times, want once", len(asked))
	}
	h := historyOf(t, c, ch.ID, asked[0].ToolCallID)
	checkDecision(t, h, false, "no clocks today", "")
	if !h.result.IsError || string(h.result.Output) != `"denied: no clocks today"` {
		t.Errorf("result %+v, want the error \"denied: no clocks today\"", h.result)
	}
	if a, want := lastAnswer(t, c, ch.ID), "tool current_time failed: denied: no clocks today"; a != want {
		t.Errorf("answer %q, want %q", a, want)
	}
}

// recordHandler keeps the log records at warning level and above, with
// their attributes.
type recordHandler struct {
	mu   *sync.Mutex
	recs *[]string
}

func newRecordHandler() recordHandler { return recordHandler{mu: new(sync.Mutex), recs: new([]string)} }

func (h recordHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h recordHandler) WithGroup(string) slog.Handler                { return h }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	*h.recs = append(*h.recs, b.String())
	h.mu.Unlock()
	return nil
}

// waitRecord waits for a record containing s.
func (h recordHandler) waitRecord(t *testing.T, s string) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		h.mu.Lock()
		var pause poll.Backoff
		for _, r := range *h.recs {
			if strings.Contains(r, s) {
				h.mu.Unlock()
				return r
			}
		}
		recs := append([]string(nil), *h.recs...)
		h.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no log record contains %q; records: %q", s, recs)
		}
		pause.Sleep()
	}
}

// TestServerRunnerEditedArgsRefused: the approver approves with edited
// arguments that fail current_time's schema. The server refuses the POST
// (400 invalid_args), and the runner logs that as a warning carrying the
// server's message; it does not ask again, so the step stays undecided:
// the chat still waits for the decision and the history holds none. A
// person's decision with valid arguments then runs the tool with them.
func TestServerRunnerEditedArgsRefused(t *testing.T) {
	t.Parallel()
	s := newToolServer(t)
	c, ctx := s.client(), testCtx(t)
	logs := newRecordHandler()
	var a approverFor
	r := client.NewRunner(c, client.WithLogger(slog.New(logs)), client.WithApprover(a.fn(func(call client.ToolCall) client.Decision {
		return client.ApproveWithArgs(call.ToolCallID, json.RawMessage(`{"timezone":5}`))
	})))
	run(t, r)

	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Approve: []string{"current_time"}, Message: "/call current_time {}"})
	if err != nil {
		t.Fatal(err)
	}
	rec := logs.waitRecord(t, "runner: decisions refused")
	if !strings.Contains(rec, "chat="+ch.ID) || !strings.Contains(rec, "invalid_args") {
		t.Errorf("warning %q, want it to name the chat and the server's invalid_args", rec)
	}
	call := pendingApproval(t, c, ch.ID)
	if asked := a.asked(); len(asked) != 1 || asked[0].ToolCallID != call.ToolCallID {
		t.Errorf("approver asked about %+v, want %s once", asked, call.ToolCallID)
	}
	if h := historyOf(t, c, ch.ID, call.ToolCallID); h.decisions != 0 || h.result.Type != "" {
		t.Errorf("history after the refused POST: %+v, want neither decision nor result", h)
	}
	if n := len(s.requestsTo("/api/v1/chats/" + ch.ID + "/approvals")); n != 1 {
		t.Errorf("%d POST /approvals, want the runner's one (a 400 is not retried)", n)
	}
	// What the server answered, as Decide reports it.
	_, err = c.Decide(ctx, ch.ID, []client.Decision{client.ApproveWithArgs(call.ToolCallID, json.RawMessage(`{"timezone":5}`))})
	if ae := apiError(t, err, 400, "invalid_args"); ae.Details["tool_call_id"] != call.ToolCallID {
		t.Errorf("invalid_args details %v, want the call's id", ae.Details)
	}

	if _, err := c.Decide(ctx, ch.ID, []client.Decision{client.ApproveWithArgs(call.ToolCallID, json.RawMessage(`{"timezone":"Europe/Paris"}`))}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	h := historyOf(t, c, ch.ID, call.ToolCallID)
	checkDecision(t, h, true, "", `{"timezone":"Europe/Paris"}`)
	if h.result.IsError || !strings.Contains(string(h.result.Output), `"timezone":"Europe/Paris"`) {
		t.Errorf("result %+v, want the time in Europe/Paris", h.result)
	}
	if n := len(a.asked()); n != 1 {
		t.Errorf("approver asked %d times, want once", n)
	}
}

// TestServerRunnerMixedStep: a step with a dynamic tool call the runner's
// handler answers and a call that waits for approval; the runner posts
// both, and the chat ends waiting, its answer giving both results in call
// order.
func TestServerRunnerMixedStep(t *testing.T) {
	t.Parallel()
	s := newToolServer(t)
	c, ctx := s.client(), testCtx(t)
	var a approverFor
	var handled atomic.Int64
	r := client.NewRunner(c, client.WithApprover(a.fn(func(call client.ToolCall) client.Decision {
		return client.ApproveWithArgs(call.ToolCallID, json.RawMessage(`{"timezone":"Asia/Tokyo"}`))
	})))
	client.Handle(r, "get_weather", "Current weather", func(ctx context.Context, in weatherIn) (weatherOut, error) {
		handled.Add(1)
		return weatherOut{City: in.City, TempC: 17}, nil
	})
	stop := run(t, r)

	ch, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: r.Tools(), Approve: []string{"current_time"},
		Message: "/call get_weather {\"city\":\"Lyon\"}\n/call current_time {}"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)

	asked := a.asked()
	if len(asked) != 1 || asked[0].ToolName != "current_time" {
		t.Fatalf("approver asked about %+v, want current_time once", asked)
	}
	if n := handled.Load(); n != 1 {
		t.Errorf("handler ran %d times, want once", n)
	}
	got := results(t, c, ch.ID)
	if len(got) != 2 || got[0].ToolName != "get_weather" || got[0].IsError || string(got[0].Output) != `{"city":"Lyon","temp_c":17}` ||
		got[1].ToolName != "current_time" || got[1].IsError || !strings.Contains(string(got[1].Output), `"timezone":"Asia/Tokyo"`) {
		t.Fatalf("results %+v", got)
	}
	checkDecision(t, historyOf(t, c, ch.ID, asked[0].ToolCallID), true, "", `{"timezone":"Asia/Tokyo"}`)
	if h := historyOf(t, c, ch.ID, got[0].ToolCallID); h.decisions != 0 {
		t.Errorf("the dynamic tool call has %d tool-decision parts, want none", h.decisions)
	}
	ans := lastAnswer(t, c, ch.ID)
	if lines := strings.Split(ans, "\n"); len(lines) != 2 || lines[0] != `tool get_weather returned {"city":"Lyon","temp_c":17}` ||
		!strings.HasPrefix(lines[1], "tool current_time returned {") {
		t.Errorf("answer %q", ans)
	}
	if na, nr := len(s.requestsTo("/api/v1/chats/"+ch.ID+"/approvals")), len(s.requestsTo("/api/v1/chats/"+ch.ID+"/tool-results")); na != 1 || nr != 1 {
		t.Errorf("%d POST /approvals and %d POST /tool-results, want one each", na, nr)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}
