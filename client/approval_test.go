package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
)

// Calls of the fake's chats: a dynamic tool, and two server-side tools that
// need approval.
var (
	weatherCall = client.ToolCall{ToolCallID: "c1", ToolName: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`), Kind: client.ActionClient}
	deleteCall  = client.ToolCall{ToolCallID: "c2", ToolName: "files_delete", Args: json.RawMessage(`{"path":"a.txt"}`),
		Kind: client.ActionApproval, Source: "files", Description: "Delete a file"}
	writeCall = client.ToolCall{ToolCallID: "c3", ToolName: "files_write", Args: json.RawMessage(`{"path":"b.txt"}`),
		Kind: client.ActionApproval, Source: "files", Description: "Write a file"}
)

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
	s := newApprovalServer(t)
	s.addChat("chat1", weatherCall, deleteCall, writeCall)
	c, ctx := s.client(), testCtx(t)

	ch, err := c.GetChat(ctx, "chat1")
	if err != nil {
		t.Fatal(err)
	}
	if ch.RequiredAction == nil || len(ch.RequiredAction.ToolCalls) != 3 {
		t.Fatalf("required_action %+v", ch.RequiredAction)
	}
	got := ch.RequiredAction.ToolCalls[1]
	if !got.NeedsApproval() || got.Source != "files" || got.Description != "Delete a file" || ch.RequiredAction.ToolCalls[0].NeedsApproval() {
		t.Errorf("calls %+v", ch.RequiredAction.ToolCalls)
	}

	_, err = c.Decide(ctx, "chat1", []client.Decision{client.Approve("c2"), client.Approve("c2"), client.Approve("c9")})
	if ae := apiError(t, err, 400, "invalid_decisions"); !strings.Contains(ae.Message, "missing c3") || !strings.Contains(ae.Message, "unknown c9") || !strings.Contains(ae.Message, "duplicate c2") {
		t.Errorf("ids: %v", err)
	}
	_, err = c.Decide(ctx, "chat1", []client.Decision{client.ApproveWithArgs("c2", json.RawMessage(`{"path":1}`)), client.Deny("c3", "")})
	apiError(t, err, 400, "invalid_args")
	if _, err = c.Decide(ctx, "chat1", nil); !client.IsStatus(err, 400) {
		t.Errorf("no decisions: %v, want a 400 naming the missing ids", err)
	}

	ch, err = c.Decide(ctx, "chat1", []client.Decision{client.ApproveWithArgs("c2", json.RawMessage(`{"path":"a2.txt"}`)), client.Deny("c3", "keep it")})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Status != client.StatusRequiresAction || len(ch.RequiredAction.ToolCalls) != 1 || ch.RequiredAction.ToolCalls[0].ToolCallID != "c1" {
		t.Errorf("after the decisions the chat still waits for c1 alone: %+v %+v", ch.Status, ch.RequiredAction)
	}
	_, err = c.Decide(ctx, "chat1", []client.Decision{client.Approve("c2"), client.Approve("c3")})
	if ae := apiError(t, err, 409, "status_conflict"); ae.Details["status"] != client.StatusRequiresAction {
		t.Errorf("second POST: details %v", ae.Details)
	}
	if ch, err = c.SubmitToolResults(ctx, "chat1", []client.ToolResult{client.TextResult("c1", "sunny")}); err != nil || ch.Status != client.StatusPending {
		t.Fatalf("tool results: %v, chat %s", err, ch.Status)
	}
	fc := s.chat("chat1")
	want := `[{"tool_call_id":"c2","approve":true,"args":{"path":"a2.txt"}},{"tool_call_id":"c3","approve":false,"reason":"keep it"}]`
	if b, _ := json.Marshal(fc.decisions); string(b) != want {
		t.Errorf("decisions\n%s\nwant\n%s", b, want)
	}
	if _, err = c.Decide(ctx, "chat1", []client.Decision{client.Approve("c2"), client.Approve("c3")}); !client.IsStatus(err, 409) {
		t.Errorf("POST on a pending chat: %v, want 409", err)
	}
}

// TestRunnerApprovals: a step with a dynamic tool call and two approvals;
// the handler runs once, the approver once per call, and the runner posts
// the results and all the decisions, each once, although the feed announces
// the chat again after the first POST.
func TestRunnerApprovals(t *testing.T) {
	t.Parallel()
	s := newApprovalServer(t)
	c := s.client()
	var handled, asked atomic.Int64
	var mu sync.Mutex
	seen := map[string]client.ToolCall{}
	r := client.NewRunner(c, client.WithApprover(func(ctx context.Context, ch client.Chat, call client.ToolCall) (client.Decision, error) {
		asked.Add(1)
		mu.Lock()
		seen[call.ToolCallID] = call
		mu.Unlock()
		if _, ok := ctx.Deadline(); !ok {
			return client.Decision{}, errors.New("no deadline on the approver's context")
		}
		if ch.ID != "chat1" {
			return client.Decision{}, errors.New("wrong chat " + ch.ID)
		}
		if call.ToolName == "files_delete" {
			return client.ApproveWithArgs("ignored: the runner sets the id", json.RawMessage(`{"path":"a.txt.bak"}`)), nil
		}
		return client.Deny(call.ToolCallID, "read-only today"), nil
	}))
	client.Handle(r, "get_weather", "", func(ctx context.Context, in weatherIn) (weatherOut, error) {
		handled.Add(1)
		time.Sleep(20 * time.Millisecond) // so the decisions, and their announcement, come first
		return weatherOut{City: in.City, TempC: 21}, nil
	})
	stop := run(t, r)
	s.addChat("chat1", weatherCall, deleteCall, writeCall)

	waitFake(t, s, "chat1", client.StatusPending)
	fc := s.chat("chat1")
	want := `[{"tool_call_id":"c2","approve":true,"args":{"path":"a.txt.bak"}},{"tool_call_id":"c3","approve":false,"reason":"read-only today"}]`
	if b, _ := json.Marshal(fc.decisions); string(b) != want {
		t.Errorf("decisions\n%s\nwant\n%s", b, want)
	}
	if len(fc.results) != 1 || fc.results[0].ToolCallID != "c1" || string(fc.results[0].Output) != `{"city":"Paris","temp_c":21}` {
		t.Errorf("results %+v", fc.results)
	}
	time.Sleep(50 * time.Millisecond) // room for a wrong second run
	if a, tr := s.posts(); a != 1 || tr != 1 {
		t.Errorf("%d POST /approvals and %d POST /tool-results, want one each", a, tr)
	}
	if handled.Load() != 1 || asked.Load() != 2 {
		t.Errorf("handler ran %d times (want 1), approver asked %d times (want 2)", handled.Load(), asked.Load())
	}
	mu.Lock()
	if d := seen["c2"]; d.Source != "files" || d.Description != "Delete a file" || string(d.Args) != `{"path":"a.txt"}` {
		t.Errorf("the approver got %+v", d)
	}
	mu.Unlock()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRunnerLeavesApprovals: without an approver, the runner posts the
// results of the dynamic tool calls and leaves the approvals pending; an
// approver that fails decides nothing.
func TestRunnerLeavesApprovals(t *testing.T) {
	t.Parallel()
	s := newApprovalServer(t)
	c := s.client()
	r := client.NewRunner(c)
	client.Handle(r, "get_weather", "", func(ctx context.Context, in weatherIn) (weatherOut, error) {
		return weatherOut{City: in.City}, nil
	})
	run(t, r)
	s.addChat("chat1", weatherCall, deleteCall)
	waitFake(t, s, "chat1", client.StatusRequiresAction, func(fc fakeChat) bool { return len(fc.results) == 1 })
	if fc := s.chat("chat1"); len(fc.pending) != 1 || fc.pending[0].ToolCallID != "c2" {
		t.Errorf("pending %+v, want the approval alone", fc.pending)
	}

	var asked atomic.Int64
	r2 := client.NewRunner(c, client.WithChatFilter(func(ch client.Chat) bool { return ch.ID == "chat2" }), client.WithApprover(func(ctx context.Context, ch client.Chat, call client.ToolCall) (client.Decision, error) {
		if asked.Add(1) == 1 {
			return client.Decision{}, errors.New("the approval service is down")
		}
		return client.Approve(call.ToolCallID), nil
	}))
	run(t, r2)
	s.addChat("chat2", writeCall, deleteCall)
	deadline := time.Now().Add(wait)
	for asked.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := asked.Load(); n != 1 {
		t.Errorf("approver asked %d times, want once (its error ends the step's decisions)", n)
	}
	if a, _ := s.posts(); a != 0 {
		t.Errorf("%d POST /approvals, want none", a)
	}
}

// TestRunnersRaceApprovals: two runners decide on the same step; the first
// POST wins, the other gets a 409, which it logs as a lost race.
func TestRunnersRaceApprovals(t *testing.T) {
	t.Parallel()
	s := newApprovalServer(t)
	c := s.client()
	var (
		lost    atomic.Int64
		arrived atomic.Int64
		both    = make(chan struct{})
	)
	for _, name := range []string{"a", "b"} {
		log := slog.New(countHandler{match: "another runner answered first", n: &lost})
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
		run(t, r)
	}
	s.addChat("chat1", deleteCall)
	waitFake(t, s, "chat1", client.StatusPending)
	deadline := time.Now().Add(wait)
	for lost.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := lost.Load(); n != 1 {
		t.Errorf("%d lost races logged, want 1", n)
	}
	if a, _ := s.posts(); a != 2 {
		t.Errorf("%d POST /approvals, want one per runner", a)
	}
	if fc := s.chat("chat1"); len(fc.decisions) != 1 {
		t.Errorf("decisions %+v, want the first POST's", fc.decisions)
	}
}

// waitFake waits until the fake's chat is in status and every cond holds.
func waitFake(t *testing.T, s *approvalServer, id, status string, cond ...func(fakeChat) bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		fc := s.chat(id)
		ok := fc.chat.Status == status
		for _, f := range cond {
			ok = ok && f(fc)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat %s is %s with decisions %+v, results %+v; want %s", id, fc.chat.Status, fc.decisions, fc.results, status)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
