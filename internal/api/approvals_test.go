package api_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// approvalTools are the server-side tools of the approval tests: "add" sums
// a and b (counting its runs), "clock" answers at once. Chats add "add" to
// the tools to approve.
type approvalTools struct {
	reg  *tools.Registry
	adds atomic.Int64
}

func newApprovalTools(t *testing.T) *approvalTools {
	at := &approvalTools{reg: tools.NewRegistry(nil)}
	add := tool.Func(tool.Decl{Name: "add", Description: "adds a and b",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`)},
		func(_ context.Context, c tool.Call) (tool.Result, error) {
			at.adds.Add(1)
			var in struct{ A, B int }
			if err := json.Unmarshal(c.Args, &in); err != nil {
				return tool.Result{}, err
			}
			return tool.JSON(in.A + in.B), nil
		})
	clock := tool.Func(tool.Decl{Name: "clock", Description: "the time"},
		func(context.Context, tool.Call) (tool.Result, error) { return tool.Text("noon"), nil })
	for _, tl := range []tool.Tool{add, clock} {
		if err := at.reg.AddTool(tl); err != nil {
			t.Fatal(err)
		}
	}
	return at
}

// onBothStores runs test on SQLite and on PostgreSQL (pgtest's rules: skipped
// without a database, failed under CI).
func onBothStores(t *testing.T, test func(t *testing.T, backend string)) {
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) { test(t, b) })
	}
}

// approvalChat starts a live server on backend whose model first calls add
// {1, 2} (and the calls of extra), then answers "done"; the chat approves
// "add".
func approvalChat(t *testing.T, backend string, body map[string]any, extra ...llmtest.ToolCall) (*server, *llmtest.OpenAIChat, *approvalTools, string, chat.Chat) {
	t.Helper()
	fake := llmtest.NewOpenAIChat(t)
	at := newApprovalTools(t)
	calls := append([]llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}, extra...)
	fake.Push(llmtest.Turn{ToolCalls: calls}, llmtest.Turn{Text: "done"})
	var s *server
	if backend == "postgres" {
		st, ps := pgtest.Replica(t, pgtest.Migrated(t), "parley_test_"+strings.ToLower(rand.Text()[:10]), nil)
		s = start(t, st, ps, setup{cfg: liveConfig(fake.URL), keepAlive: time.Hour, tools: at.reg})
		s.live = true
		runEngine(t, s)
	} else {
		s = newLive(t, fake, func(su *setup) { su.tools = at.reg })
	}
	tok := s.token("alice")
	if body == nil {
		body = map[string]any{}
	}
	body["message"], body["approve"], body["title"] = "add one and two", []string{"add"}, "approvals"
	c := s.createChat(tok, body)
	return s, fake, at, tok, s.waitFor(tok, c.ID, chat.RequiresAction)
}

// waitFor polls the chat until it is in want.
func (s *server) waitFor(tok, id string, want chat.Status) chat.Chat {
	s.t.Helper()
	var c chat.Chat
	for range 2000 {
		s.do("GET", "/api/v1/chats/"+id, tok, nil).expect(s.t, http.StatusOK, &c)
		if c.Status == want {
			return c
		}
		if c.Status == chat.Error {
			s.t.Fatalf("chat failed: %+v", c.LastError)
		}
		sleepBriefly()
	}
	s.t.Fatalf("chat %s is %s, want %s", id, c.Status, want)
	return c
}

func decide(id string, approve bool, extra map[string]any) map[string]any {
	d := map[string]any{"tool_call_id": id, "approve": approve}
	for k, v := range extra {
		d[k] = v
	}
	return map[string]any{"decisions": []any{d}}
}

// secondRequest is the model's second request body, without spaces.
func secondRequest(t *testing.T, fake *llmtest.OpenAIChat) string {
	t.Helper()
	reqs := fake.Requests()
	if len(reqs) < 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	return strings.ReplaceAll(string(reqs[1].Body), " ", "")
}

func TestApprovalApprovedCallRunsOnce(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s, fake, at, tok, c := approvalChat(t, backend, nil)
		ra := c.RequiredAction
		if ra == nil || len(ra.ToolCalls) != 1 {
			t.Fatalf("required_action %+v", ra)
		}
		if got := ra.ToolCalls[0]; got.Kind != chat.ActionApproval || got.ToolCallID != "c1" || got.Source != "builtin" || got.Description != "adds a and b" {
			t.Fatalf("pending call %+v", got)
		}
		if at.adds.Load() != 0 {
			t.Fatal("add ran before its approval")
		}
		s.do("POST", "/api/v1/chats/"+c.ID+"/approvals", tok, decide("c1", true, nil)).expect(t, http.StatusOK, nil)
		s.waitFor(tok, c.ID, chat.Waiting)
		if n := at.adds.Load(); n != 1 {
			t.Fatalf("add ran %d times, want once", n)
		}
		if body := secondRequest(t, fake); !strings.Contains(body, `"tool_call_id":"c1"`) || !strings.Contains(body, `"content":"3"`) {
			t.Fatalf("the model did not get the result: %s", body)
		}
		var decision *chat.Part
		for _, m := range s.messages(tok, c.ID) {
			for _, p := range m.Parts {
				if p.Type == chat.PartToolDecision {
					decision = &p
				}
			}
		}
		if decision == nil || decision.Decision == nil || !decision.Decision.Approved || decision.Decision.DecidedBy != "alice" ||
			decision.Decision.Token == "" || decision.Decision.DecidedAt.IsZero() {
			t.Fatalf("decision in the history: %+v", decision)
		}
		// Decided already: a second POST finds nothing to decide.
		s.do("POST", "/api/v1/chats/"+c.ID+"/approvals", tok, decide("c1", true, nil)).expectError(t, http.StatusConflict, "status_conflict")
	})
}

func TestApprovalWithEditedArgs(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s, fake, at, tok, c := approvalChat(t, backend, nil)
		path := "/api/v1/chats/" + c.ID + "/approvals"
		e := s.do("POST", path, tok, decide("c1", true, map[string]any{"args": map[string]any{"a": "five"}})).expectError(t, http.StatusBadRequest, "invalid_args")
		if !strings.Contains(e.Error.Message, "/a") || !strings.Contains(e.Error.Message, "b") {
			t.Fatalf("the validation error does not say what is wrong: %s", e.Error.Message)
		}
		s.do("POST", path, tok, decide("c1", true, map[string]any{"args": "not an object"})).expectError(t, http.StatusBadRequest, "invalid_args")
		// Nothing was written: the chat still waits for the same decision.
		if again := s.waitFor(tok, c.ID, chat.RequiresAction); len(again.RequiredAction.ToolCalls) != 1 || len(s.messages(tok, c.ID)) != 2 {
			t.Fatalf("a refused decision left something behind: %+v", s.messages(tok, c.ID))
		}
		s.do("POST", path, tok, decide("c1", true, map[string]any{"args": map[string]any{"a": 5, "b": 5}})).expect(t, http.StatusOK, nil)
		s.waitFor(tok, c.ID, chat.Waiting)
		if body := secondRequest(t, fake); !strings.Contains(body, `"content":"10"`) {
			t.Fatalf("the edited args did not run: %s", body)
		}
		if at.adds.Load() != 1 {
			t.Fatalf("add ran %d times", at.adds.Load())
		}
	})
}

func TestApprovalDeniedWithReason(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s, fake, at, tok, c := approvalChat(t, backend, nil)
		s.do("POST", "/api/v1/chats/"+c.ID+"/approvals", tok, decide("c1", false, map[string]any{"reason": "not today"})).expect(t, http.StatusOK, nil)
		s.waitFor(tok, c.ID, chat.Waiting)
		if at.adds.Load() != 0 {
			t.Fatal("a denied call ran")
		}
		if body := secondRequest(t, fake); !strings.Contains(body, `denied:nottoday`) {
			t.Fatalf("the model was not told of the denial: %s", body)
		}
	})
}

// TestApprovalMixedStep: a step with a free call, a call to approve and a
// client call runs the free one at once and waits for both answers,
// whichever comes first.
func TestApprovalMixedStep(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		for _, order := range []string{"approval first", "results first"} {
			t.Run(order, func(t *testing.T) {
				dyn := []map[string]any{{"name": "ask_user", "description": "asks", "input_schema": map[string]any{"type": "object"}}}
				s, fake, at, tok, c := approvalChat(t, backend, map[string]any{"dynamic_tools": dyn},
					llmtest.ToolCall{ID: "f1", Name: "clock", Args: `{}`}, llmtest.ToolCall{ID: "d1", Name: "ask_user", Args: `{}`})
				kinds := map[string]string{}
				for _, tc := range c.RequiredAction.ToolCalls {
					kinds[tc.ToolCallID] = tc.Kind
				}
				if len(kinds) != 2 || kinds["c1"] != chat.ActionApproval || kinds["d1"] != chat.ActionClient {
					t.Fatalf("pending %+v", c.RequiredAction.ToolCalls)
				}
				approve := func() {
					s.do("POST", "/api/v1/chats/"+c.ID+"/approvals", tok, decide("c1", true, nil)).expect(t, http.StatusOK, nil)
				}
				answer := func() {
					s.do("POST", "/api/v1/chats/"+c.ID+"/tool-results", tok, map[string]any{"results": []any{
						map[string]any{"tool_call_id": "d1", "output": "yes"}}}).expect(t, http.StatusOK, nil)
				}
				first, second := approve, answer
				if order == "results first" {
					first, second = answer, approve
				}
				first()
				still := s.waitFor(tok, c.ID, chat.RequiresAction)
				if len(still.RequiredAction.ToolCalls) != 1 {
					t.Fatalf("after the first answer, pending %+v", still.RequiredAction.ToolCalls)
				}
				second()
				s.waitFor(tok, c.ID, chat.Waiting)
				body := secondRequest(t, fake)
				for _, want := range []string{`"content":"3"`, `"content":"noon"`, `"content":"yes"`} {
					if !strings.Contains(body, want) {
						t.Errorf("the model's request lacks %s: %s", want, body)
					}
				}
				if at.adds.Load() != 1 {
					t.Fatalf("add ran %d times", at.adds.Load())
				}
			})
		}
	})
}

func TestApprovalIDsMustMatchAndKindsStayApart(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		dyn := []map[string]any{{"name": "ask_user", "description": "asks", "input_schema": map[string]any{"type": "object"}}}
		s, _, _, tok, c := approvalChat(t, backend, map[string]any{"dynamic_tools": dyn}, llmtest.ToolCall{ID: "d1", Name: "ask_user", Args: `{}`})
		path := "/api/v1/chats/" + c.ID + "/approvals"
		for _, tc := range []struct {
			name, detail string
			body         map[string]any
		}{
			{"missing", "missing", map[string]any{"decisions": []any{}}},
			{"unknown", "unknown", map[string]any{"decisions": []any{map[string]any{"tool_call_id": "c1", "approve": true}, map[string]any{"tool_call_id": "zz", "approve": true}}}},
			{"a client call is no approval", "unknown", map[string]any{"decisions": []any{map[string]any{"tool_call_id": "c1", "approve": true}, map[string]any{"tool_call_id": "d1", "approve": true}}}},
			{"duplicate", "duplicate", map[string]any{"decisions": []any{map[string]any{"tool_call_id": "c1", "approve": true}, map[string]any{"tool_call_id": "c1", "approve": false}}}},
		} {
			e := s.do("POST", path, tok, tc.body).expectError(t, http.StatusBadRequest, "invalid_decisions")
			if _, ok := e.Error.Details[tc.detail]; !ok {
				t.Errorf("%s: details %v", tc.name, e.Error.Details)
			}
		}
		// Results for the client call only: an approval is not a tool result.
		s.do("POST", "/api/v1/chats/"+c.ID+"/tool-results", tok, map[string]any{"results": []any{
			map[string]any{"tool_call_id": "c1", "output": 3}, map[string]any{"tool_call_id": "d1", "output": "x"}}}).expectError(t, http.StatusBadRequest, "invalid_tool_results")
		s.do("POST", "/api/v1/chats/"+c.ID+"/tool-results", tok, map[string]any{"results": []any{
			map[string]any{"tool_call_id": "d1", "output": "x"}}}).expect(t, http.StatusOK, nil)
		// Only approvals are left: more tool results are a conflict.
		s.do("POST", "/api/v1/chats/"+c.ID+"/tool-results", tok, map[string]any{"results": []any{
			map[string]any{"tool_call_id": "d1", "output": "x"}}}).expectError(t, http.StatusConflict, "status_conflict")
		other := s.token("bob")
		s.do("POST", path, other, decide("c1", true, nil)).expectError(t, http.StatusNotFound, "not_found")
	})
}

func TestApprovalInterrupted(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s, _, at, tok, c := approvalChat(t, backend, nil)
		s.do("POST", "/api/v1/chats/"+c.ID+"/interrupt", tok, nil).expect(t, http.StatusOK, nil)
		s.waitFor(tok, c.ID, chat.Waiting)
		s.do("POST", "/api/v1/chats/"+c.ID+"/approvals", tok, decide("c1", true, nil)).expectError(t, http.StatusConflict, "status_conflict")
		if at.adds.Load() != 0 {
			t.Fatal("an interrupted call ran")
		}
	})
}

func sleepBriefly() { time.Sleep(5 * time.Millisecond) }

// TestApprovalFirstPostWinsAcrossReplicas: two replicas on one PostgreSQL
// database; 50 clients released together post the same decision, every
// other one through each replica. Exactly one wins, the call runs once, and
// every other answer is a 409.
func TestApprovalFirstPostWinsAcrossReplicas(t *testing.T) {
	dsn := pgtest.Migrated(t)
	channel := "parley_test_" + strings.ToLower(rand.Text()[:10])
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}}, llmtest.Turn{Text: "done"})
	at := newApprovalTools(t)
	replica := func() *server {
		st, ps := pgtest.Replica(t, dsn, channel, nil)
		s := start(t, st, ps, setup{cfg: liveConfig(fake.URL), keepAlive: time.Hour, tools: at.reg})
		s.live = true
		runEngine(t, s)
		return s
	}
	a, b := replica(), replica()
	tok := a.token("alice")
	c := a.createChat(tok, map[string]any{"title": "first wins", "approve": []string{"add"}, "message": "add"})
	a.waitFor(tok, c.ID, chat.RequiresAction)

	body, _ := json.Marshal(decide("c1", true, nil))
	expectOneWinner(t, postAtOnce(t, []*server{a, b}, "/api/v1/chats/"+c.ID+"/approvals", tok, body, 50))
	b.waitFor(tok, c.ID, chat.Waiting)
	if at.adds.Load() != 1 {
		t.Fatalf("add ran %d times, want once", at.adds.Load())
	}
}

// TestToolsListShowApprovalPolicy: GET /api/v1/tools shows each tool's
// approval policy and whether its calls need a decision.
func TestToolsListShowApprovalPolicy(t *testing.T) {
	at := newApprovalTools(t)
	if err := at.reg.SetApprovalPolicy(tools.ApprovalPolicy{Rules: []tools.ApprovalRule{{Match: "a*", Approval: tools.ApprovalAlways}}}); err != nil {
		t.Fatal(err)
	}
	s := newSQLite(t, func(su *setup) { su.tools = at.reg })
	var body struct {
		Tools []struct {
			Name             string `json:"name"`
			Approval         string `json:"approval"`
			RequiresApproval bool   `json:"requires_approval"`
		} `json:"tools"`
	}
	s.do("GET", "/api/v1/tools", s.token("alice"), nil).expect(t, http.StatusOK, &body)
	got := map[string]string{}
	for _, tl := range body.Tools {
		got[tl.Name] = fmt.Sprintf("%s %v", tl.Approval, tl.RequiresApproval)
	}
	if len(got) != 2 || got["add"] != "always true" || got["clock"] != "never false" {
		t.Fatalf("tools: %v", got)
	}
}

// TestApprovalDeadlineDenies: nobody decides within the chat's
// tool_result_timeout (1s), so the call is denied, the model is told, and a
// decision sent afterwards is a conflict.
func TestApprovalDeadlineDenies(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	at := newApprovalTools(t)
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}}, llmtest.Turn{Text: "nobody answered"})
	s := newSQLite(t, func(su *setup) { su.cfg, su.tools = liveConfig(fake.URL), at.reg })
	s.live = true
	runEngine(t, s, func(c *engine.Config) { c.PollInterval = 50 * time.Millisecond })
	tok := s.token("alice")
	c := s.createChat(tok, map[string]any{"title": "deadline", "message": "add", "approve": []string{"add"}, "tool_result_timeout": "1s"})
	s.waitFor(tok, c.ID, chat.RequiresAction)
	s.waitFor(tok, c.ID, chat.Waiting)
	if at.adds.Load() != 0 {
		t.Fatal("an undecided call ran")
	}
	if body := secondRequest(t, fake); !strings.Contains(body, "denied:nodecisionbeforedeadline") {
		t.Fatalf("the model was not told: %s", body)
	}
	s.do("POST", "/api/v1/chats/"+c.ID+"/approvals", tok, decide("c1", true, nil)).expectError(t, http.StatusConflict, "status_conflict")
}

// vanishingSource offers one tool, "remote_add", until gone is set: like an
// MCP server that disconnected.
type vanishingSource struct{ gone atomic.Bool }

func (v *vanishingSource) Name() string { return "remote" }
func (v *vanishingSource) Tools(context.Context) ([]tool.Decl, error) {
	if v.gone.Load() {
		return nil, nil
	}
	return []tool.Decl{{Name: "remote_add", Description: "adds remotely", InputSchema: json.RawMessage(`{"type":"object"}`)}}, nil
}
func (v *vanishingSource) InvokeBatch(_ context.Context, calls []tool.Call) ([]tool.Result, error) {
	out := make([]tool.Result, len(calls))
	for i := range calls {
		out[i] = tool.Text("added")
	}
	return out, nil
}
func (v *vanishingSource) Close() error { return nil }

// TestApprovalEditedArgsForAToolThatWentAway: edited args of a call whose
// tool is not offered now (its source disconnected) cannot be checked: 409
// tool_unavailable, nothing written; a decision without edits is taken.
func TestApprovalEditedArgsForAToolThatWentAway(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "remote_add", Args: `{}`}}}, llmtest.Turn{Text: "done"})
	reg := tools.NewRegistry(nil)
	src := &vanishingSource{}
	if err := reg.AddSource(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	s := newLive(t, fake, func(su *setup) { su.tools = reg })
	tok := s.token("alice")
	c := s.createChat(tok, map[string]any{"title": "gone", "message": "add", "approve": []string{"remote_*"}})
	s.waitFor(tok, c.ID, chat.RequiresAction)
	src.gone.Store(true)
	_ = reg.Refresh(context.Background())
	path := "/api/v1/chats/" + c.ID + "/approvals"
	s.do("POST", path, tok, decide("c1", true, map[string]any{"args": map[string]any{"x": 1}})).expectError(t, http.StatusConflict, "tool_unavailable")
	if len(s.messages(tok, c.ID)) != 2 {
		t.Fatal("a refused decision was written")
	}
	s.do("POST", path, tok, decide("c1", false, map[string]any{"reason": "it went away"})).expect(t, http.StatusOK, nil)
	s.waitFor(tok, c.ID, chat.Waiting)
}
