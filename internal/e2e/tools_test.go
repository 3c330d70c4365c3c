package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// barrier returns a function each of n parties calls; it returns nil once all
// n are inside at the same time, or an error after a deadline.
func barrier(n int) func() error {
	var wg sync.WaitGroup
	wg.Add(n)
	return func() error {
		wg.Done()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the other groups never ran at the same time")
		}
	}
}

// mixedStep registers two sources (A: a_x, a_y; B: b_x) and two single Tools
// (one, two) whose groups all wait on one barrier, so the step completes
// only if they overlap.
func mixedStep(t *testing.T, failA func() error) (a, b *source, setup func(*tools.Registry)) {
	meet := barrier(3) // source A, source B, and the single Tools' group (tool "one")
	a = &source{name: "A", decls: []tool.Decl{decl("a_x"), decl("a_y")}}
	a.fn = func(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
		if err := meet(); err != nil {
			return nil, err
		}
		if failA != nil {
			if err := failA(); err != nil {
				return nil, err
			}
		}
		return echoResults(calls), nil
	}
	b = &source{name: "B", decls: []tool.Decl{decl("b_x")}}
	b.fn = func(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
		if err := meet(); err != nil {
			return nil, err
		}
		return echoResults(calls), nil
	}
	single := func(name string, wait bool) tool.Tool {
		return tool.Func(decl(name), func(ctx context.Context, c tool.Call) (tool.Result, error) {
			if wait {
				if err := meet(); err != nil {
					return tool.Result{}, err
				}
			}
			return tool.JSON(name + ":" + c.ID), nil
		})
	}
	setup = func(reg *tools.Registry) {
		for _, err := range []error{reg.AddSource(context.Background(), a), reg.AddSource(context.Background(), b),
			reg.AddTool(single("one", true)), reg.AddTool(single("two", false))} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return a, b, setup
}

var mixedCalls = []llmtest.ToolCall{
	{ID: "a1", Name: "a_x", Args: `{}`}, {ID: "g1", Name: "one", Args: `{}`}, {ID: "b1", Name: "b_x", Args: `{}`},
	{ID: "d1", Name: "ask_user", Args: `{"q":"ok?"}`}, {ID: "a2", Name: "a_y", Args: `{}`}, {ID: "g2", Name: "two", Args: `{}`},
	{ID: "b2", Name: "b_x", Args: `{}`},
}

func createWithDynamic(s *server, msg string) chat.Chat {
	s.t.Helper()
	var c chat.Chat
	code := s.call("POST", "/api/v1/chats", map[string]any{"message": msg, "title": "t", "dynamic_tools": []map[string]any{
		{"name": "ask_user", "description": "asks", "input_schema": map[string]any{"type": "object"}},
	}}, &c)
	if code != 201 {
		s.t.Fatalf("create: %d", code)
	}
	return c
}

// toolCallIDsOfRequest lists the tool_call_id of each tool message of a Chat
// Completions request, in order.
func toolCallIDsOfRequest(t *testing.T, body []byte) []string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			ids = append(ids, m.ToolCallID)
		}
	}
	return ids
}

func TestMixedStepOneBatchPerSourceConcurrentResultsInCallOrder(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{ToolCalls: mixedCalls}, llmtest.Turn{Text: "all done"})
	a, b, setup := mixedStep(t, nil)
	s := start(t, openSQLite(t, t.TempDir()), fake, setup)

	c := createWithDynamic(s, "go")
	c = s.waitStatus(c.ID, chat.RequiresAction)
	if got := a.seen(); len(got) != 1 || !slices.Equal(got[0], []string{"a1", "a2"}) {
		t.Fatalf("source A batches %v", got)
	}
	if got := b.seen(); len(got) != 1 || !slices.Equal(got[0], []string{"b1", "b2"}) {
		t.Fatalf("source B batches %v", got)
	}
	if ra := c.RequiredAction; ra == nil || len(ra.ToolCalls) != 1 || ra.ToolCalls[0].ToolCallID != "d1" {
		t.Fatalf("required_action %+v", c.RequiredAction)
	}
	code := s.call("POST", "/api/v1/chats/"+c.ID+"/tool-results", map[string]any{"results": []map[string]any{
		{"tool_call_id": "d1", "output": "yes"}}}, nil)
	if code != 200 {
		t.Fatalf("tool-results: %d", code)
	}
	s.waitStatus(c.ID, chat.Waiting)
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	want := []string{"a1", "g1", "b1", "d1", "a2", "g2", "b2"}
	if got := toolCallIDsOfRequest(t, reqs[1].Body); !slices.Equal(got, want) {
		t.Fatalf("results in the next request: %v, want %v", got, want)
	}
}

// sourceFailure checks what a source-level failure does, for a source A that fails
// with fail (an error, or a panic).
func sourceFailure(t *testing.T, fail func() error, wantInError string) {
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{ToolCalls: mixedCalls})
	_, _, setup := mixedStep(t, fail)
	s := start(t, openSQLite(t, t.TempDir()), fake, setup)

	c := createWithDynamic(s, "go")
	c = s.waitStatus(c.ID, chat.Error)
	if c.LastError == nil || c.LastError.Source != "A" || !strings.Contains(c.LastError.Message, wantInError) {
		t.Fatalf("last_error %+v", c.LastError)
	}
	msgs := s.messages(c.ID)
	results := map[string]chat.Part{}
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult {
				results[p.ToolCallID] = p
			}
		}
	}
	for _, id := range []string{"a1", "a2"} {
		if r := results[id]; !r.IsError || !strings.Contains(string(r.Output), "A") {
			t.Errorf("failed batch call %s: %+v", id, r)
		}
	}
	for _, id := range []string{"b1", "b2", "g1", "g2"} {
		if r := results[id]; r.IsError || !strings.Contains(string(r.Output), id) {
			t.Errorf("kept result %s: %+v", id, r)
		}
	}
	if r := results["d1"]; !r.IsError || !strings.Contains(string(r.Output), "not executed") {
		t.Errorf("dynamic call d1: %+v", r)
	}
	// The server keeps serving: a new chat is answered, and retry continues.
	fake.Push(llmtest.Turn{Text: "still here"}, llmtest.Turn{Text: "continued"})
	var other chat.Chat
	s.call("POST", "/api/v1/chats", map[string]any{"message": "ping", "title": "t"}, &other)
	s.waitStatus(other.ID, chat.Waiting)
	if code := s.call("POST", "/api/v1/chats/"+c.ID+"/retry", nil, nil); code != 200 {
		t.Fatalf("retry: %d", code)
	}
	s.waitStatus(c.ID, chat.Waiting)
	last := fake.Requests()[len(fake.Requests())-1]
	if got := toolCallIDsOfRequest(t, last.Body); len(got) != 7 {
		t.Fatalf("retried request has results %v", got)
	}
}

func TestSourceErrorFailsItsBatchOnly(t *testing.T) {
	sourceFailure(t, func() error { return fmt.Errorf("backend down") }, "backend down")
}

func TestSourcePanicFailsItsBatchOnly(t *testing.T) {
	sourceFailure(t, func() error { panic("lua state corrupted") }, "lua state corrupted")
}

// TestDeadlineExpiresWhileNoReplicaRuns: the chat waits for a client that
// never answers; every replica is down when the deadline passes; the next
// replica to start resumes the chat with a synthetic result.
func TestDeadlineExpiresWhileNoReplicaRuns(t *testing.T) {
	dir := t.TempDir()
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "d1", Name: "ask_user", Args: `{}`}}}, llmtest.Turn{Text: "gave up waiting"})
	st := openSQLite(t, dir)
	s := start(t, st, fake, nil)
	var c chat.Chat
	s.call("POST", "/api/v1/chats", map[string]any{"message": "go", "title": "t", "tool_result_timeout": "1s",
		"dynamic_tools": []map[string]any{{"name": "ask_user", "description": "asks", "input_schema": map[string]any{"type": "object"}}}}, &c)
	c = s.waitStatus(c.ID, chat.RequiresAction)
	s.stop()
	st.Close()
	time.Sleep(time.Until(c.RequiredAction.Deadline) + 50*time.Millisecond) // every replica is down past the deadline

	s2 := start(t, openSQLite(t, dir), fake, nil)
	s2.waitStatus(c.ID, chat.Waiting)
	var found bool
	for _, m := range s2.messages(c.ID) {
		for _, p := range m.Parts {
			if p.ToolCallID == "d1" && p.Type == chat.PartToolResult && p.IsError && strings.Contains(string(p.Output), "deadline") {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("no synthetic deadline result")
	}
	if got := toolCallIDsOfRequest(t, fake.Requests()[1].Body); !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("resumed request results %v", got)
	}
}
