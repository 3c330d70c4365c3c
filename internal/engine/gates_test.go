package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/invariant"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// These tests hold a model call or a tool call on a gate the test opens
// (or never opens), so what they do while it is in progress cannot race its
// end; a wait only has a generous deadline, so a broken engine fails the
// test instead of hanging it.

// await waits for c to be closed (or to deliver), failing the test if
// that does not happen before a generous deadline.
func await[T any](t *testing.T, c <-chan T, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// wireMessage is one message of a Chat Completions request, as the fake
// received it.
type wireMessage struct {
	Role       string
	Content    string // a string content; "" when absent or null
	ToolCallID string
	ToolCalls  []string // the ids of an assistant message's calls, in order
}

// String is the message in one line, for comparisons and failure output.
func (m wireMessage) String() string {
	s := m.Role + ":" + m.Content
	if m.ToolCallID != "" {
		s = m.Role + "[" + m.ToolCallID + "]:" + m.Content
	}
	if len(m.ToolCalls) > 0 {
		s += "->" + strings.Join(m.ToolCalls, ",")
	}
	return s
}

// wireMessages decodes the messages of a request the fake received, each
// as its String.
func wireMessages(t *testing.T, r llmtest.Request) []string {
	t.Helper()
	var body struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("request body: %v: %s", err, r.Body)
	}
	var out []string
	for _, m := range body.Messages {
		w := wireMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		if len(m.Content) > 0 && string(m.Content) != "null" {
			if err := json.Unmarshal(m.Content, &w.Content); err != nil {
				t.Fatalf("content of a %s message is not a string: %s", m.Role, m.Content)
			}
		}
		for _, c := range m.ToolCalls {
			w.ToolCalls = append(w.ToolCalls, c.ID)
		}
		out = append(out, w.String())
	}
	return out
}

// wantMessages fails the test unless got is want.
func wantMessages(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// heldDeadlines is a store on which engines find no expired deadline until
// open is closed, so a test sees a requires_action chat as it is before its
// deadline is handled, however short the deadline.
type heldDeadlines struct {
	store.Store
	open <-chan struct{}
}

func (s heldDeadlines) ExpiredActions(ctx context.Context, limit int) ([]store.Expired, error) {
	select {
	case <-s.open:
		return s.Store.ExpiredActions(ctx, limit)
	default:
		return nil, nil
	}
}

// gatedTools is a registry with two server-side tools: "add", summing a and
// b at once, and "slow", which closes entered when called and then waits
// for gate, answering "released", or for its context to end, answering its
// cause.
func gatedTools(t *testing.T, entered chan<- struct{}, gate <-chan struct{}) *tools.Dispatcher {
	t.Helper()
	obj := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}`)
	reg := tools.NewRegistry(nil)
	add := tool.Func(tool.Decl{Name: "add", Description: "adds a and b", InputSchema: obj},
		func(_ context.Context, c tool.Call) (tool.Result, error) {
			var in struct{ A, B int }
			if err := json.Unmarshal(c.Args, &in); err != nil {
				return tool.Result{}, err
			}
			return tool.JSON(in.A + in.B), nil
		})
	slow := tool.Func(tool.Decl{Name: "slow", Description: "waits for the test", InputSchema: obj},
		func(ctx context.Context, _ tool.Call) (tool.Result, error) {
			close(entered)
			select {
			case <-gate:
				return tool.JSON("released"), nil
			case <-ctx.Done():
				// The cause, not ctx.Err(): the result then reads the same
				// whichever of the tool and the dispatcher notices first.
				return tool.Result{}, context.Cause(ctx)
			}
		})
	for _, tl := range []tool.Tool{add, slow} {
		if err := reg.AddTool(tl); err != nil {
			t.Fatal(err)
		}
	}
	return tools.NewDispatcher(reg, tools.Options{}, nil)
}

// TestShutdownWhileToolsRunHandsTheChatBack: an engine stopped while a
// server-side tool is running (held on a gate that never opens) hands the
// chat back pending with a result for every call, so nothing is left
// dangling: the earlier step's result as it was, and for the step cut short
// its other call's result (known before any tool ran) and "cancelled" for
// the one stopped, in call order. A second engine then continues the chat,
// and its model call gets every result.
func TestShutdownWhileToolsRunHandsTheChatBack(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Args: `{"a":1,"b":2}`}}},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c2", Name: "slow", Args: `{}`}, {ID: "c3", Name: "nope", Args: `{}`}}},
		llmtest.Turn{Text: "done by the second engine"},
	)
	entered := make(chan struct{})
	stop := h.start(gatedTools(t, entered, make(chan struct{})))
	c := h.create("add, then wait")
	await(t, entered, "the slow tool to be called")
	stop()

	c = h.waitStatus(c.ID, chat.Pending)
	if c.WorkerID != "" {
		t.Fatalf("a handed-back chat keeps worker %q", c.WorkerID)
	}
	msgs := h.history(c.ID)
	// The check the store runs when the test ends, now: the second engine
	// would answer a dangling call before the end.
	if err := chat.CheckHistory(c.Status, msgs, invariant.MayWait(c, msgs)); err != nil {
		t.Fatalf("history of the handed-back chat: %v\n%+v", err, msgs)
	}
	// Each part as "message index role:what", so the test sees which
	// results share a message.
	var got []string
	for i, m := range msgs {
		for _, p := range m.Parts {
			switch p.Type {
			case chat.PartText:
				got = append(got, fmt.Sprintf("%d %s:%s", i, m.Role, p.Text))
			case chat.PartToolCall:
				got = append(got, fmt.Sprintf("%d %s:call %s", i, m.Role, p.ToolCallID))
			case chat.PartToolResult:
				got = append(got, fmt.Sprintf("%d %s:%s error=%v %s", i, m.Role, p.ToolCallID, p.IsError, p.Output))
			}
		}
	}
	wantMessages(t, "history of the handed-back chat", got,
		"0 user:add, then wait",
		"1 assistant:call c1",
		"2 tool:c1 error=false 3",
		"3 assistant:call c2",
		"3 assistant:call c3",
		`4 tool:c2 error=true "cancelled while it ran, so it may have taken effect: the server is shutting down"`,
		`4 tool:c3 error=true "unknown tool \"nope\"; available tools: add, slow"`,
	)
	if n := len(h.fake.Requests()); n != 2 {
		t.Fatalf("%d model calls before the hand-back, want 2", n)
	}

	h.start(gatedTools(t, make(chan struct{}), nil))
	h.waitStatus(c.ID, chat.Waiting)
	reqs := h.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	wantMessages(t, "the second engine's model call", wireMessages(t, reqs[2]),
		"user:add, then wait",
		"assistant:->c1",
		"tool[c1]:3",
		"assistant:->c2,c3",
		"tool[c2]:error: cancelled while it ran, so it may have taken effect: the server is shutting down",
		`tool[c3]:error: unknown tool "nope"; available tools: add, slow`,
	)
	msgs = h.history(c.ID)
	if len(msgs) != 6 || msgs[5].Role != chat.RoleAssistant || msgs[5].Parts[0].Text != "done by the second engine" {
		t.Fatalf("history: %+v", msgs)
	}
}
