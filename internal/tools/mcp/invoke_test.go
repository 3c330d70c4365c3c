package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/tool"
)

// 100 calls that each return only once all 100 are in flight complete only
// if the batch sends them at once.
func TestBatchCallsRunConcurrently(t *testing.T) {
	s := openMem(t, newTestServer(0).Server, Config{MaxConcurrency: 100, CallTimeout: 10 * time.Second})
	var calls []tool.Call
	for range 100 {
		calls = append(calls, call("t_barrier", `{"group":"all","n":100}`))
	}
	for i, r := range invoke(t, s, calls...) {
		if got := okText(t, r); got != "ok" {
			t.Fatalf("call %d: %q", i, got)
		}
	}
}

func TestMaxConcurrencyBoundsCallsInFlight(t *testing.T) {
	ts := newTestServer(0)
	s := openMem(t, ts.Server, Config{MaxConcurrency: 5})
	var calls []tool.Call
	for range 30 {
		calls = append(calls, call("t_gauge", `{}`))
	}
	done := make(chan []tool.Result, 1)
	go func() {
		res, err := s.InvokeBatch(context.Background(), calls)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for range 5 { // the first five start without any call ending
		receive(t, "a call to start", ts.gaugeArrived)
	}
	for i := range 30 { // then each that ends lets one more start
		ts.gaugeRelease <- struct{}{}
		if i < 25 {
			receive(t, "the next call to start", ts.gaugeArrived)
		}
	}
	res := receive(t, "the batch", done)
	if len(res) != 30 {
		t.Fatalf("%d results", len(res))
	}
	if m := ts.maxInflight.Load(); m != 5 {
		t.Fatalf("at most %d calls were in flight, want 5", m)
	}
}

func TestResultsComeInCallOrder(t *testing.T) {
	const n = 20
	s := openMem(t, newTestServer(n).Server, Config{})
	var calls []tool.Call
	for i := range n {
		calls = append(calls, call("t_order", fmt.Sprintf(`{"i":%d}`, i)))
	}
	for i, r := range invoke(t, s, calls...) {
		if got := okText(t, r); got != fmt.Sprint(i) {
			t.Fatalf("result %d is %q", i, got)
		}
	}
}

func TestErrorResults(t *testing.T) {
	s := openMem(t, newTestServer(0).Server, Config{CallTimeout: 100 * time.Millisecond})
	res := invoke(t, s,
		call("t_fail", `{}`),
		call("t_rpcfail", `{}`),
		call("t_slow", `{}`),
		call("t_echo", `{"msg":"still fine"}`),
		call("t_gone", `{}`),
	)
	want := []struct {
		out     string
		isError bool
	}{
		{`"boom"`, true},
		{`"tool \"t_rpcfail\" failed: no such thing (code 4242)"`, true},
		{`"timed out after 100ms"`, true},
		{`"still fine"`, false},
		{`"MCP server \"t\" no longer offers tool \"t_gone\""`, true},
	}
	for i, w := range want {
		if string(res[i].Output) != w.out || res[i].IsError != w.isError {
			t.Errorf("result %d: %s (error %v), want %s (error %v)", i, res[i].Output, res[i].IsError, w.out, w.isError)
		}
	}
}

func TestContentShapes(t *testing.T) {
	s := openMem(t, newTestServer(0).Server, Config{})
	res := invoke(t, s, call("t_shapes", `{}`), call("t_structured", `{}`), call("t_echo", `{"msg":"hi"}`))
	want := []string{
		`{"content":[` +
			`{"type":"text","text":"hello"},` +
			`{"type":"image","mime_type":"image/png","data":"AQID"},` +
			`{"type":"audio","mime_type":"audio/wav","data":"BA=="},` +
			`{"type":"resource_link","uri":"file:///a.txt","name":"a.txt","description":"the a","mime_type":"text/plain"},` +
			`{"type":"resource","uri":"file:///b.txt","text":"bee","mime_type":"text/plain"},` +
			`{"type":"resource","uri":"file:///c.bin","blob":"BQY="}` +
			`],"structured":{"n":1}}`,
		`{"content":[{"type":"text","text":"{\"n\":1}"}],"structured":{"n":1}}`,
		`"hi"`,
	}
	for i, w := range want {
		if res[i].IsError || !jsonEqual(t, res[i].Output, w) {
			t.Errorf("result %d:\n got %s\nwant %s", i, res[i].Output, w)
		}
	}
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("output %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestProgressReachesTheCall(t *testing.T) {
	ts := newTestServer(0)
	s := openMem(t, ts.Server, Config{})
	var mu sync.Mutex
	var got []tool.Progress
	c := call("t_progress", `{}`)
	c.Progress = func(p tool.Progress) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
		close(ts.progressAck) // the tool ends only once its report arrived here
	}
	if out := okText(t, invoke(t, s, c)[0]); out != "done" {
		t.Fatalf("output %q", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []tool.Progress{{Progress: 1, Total: 2, Message: "half way"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("progress %v, want %v", got, want)
	}
}

func TestCancelReturnsPromptlyAndCancelsOnTheServer(t *testing.T) {
	ts := newTestServer(0)
	s := openMem(t, ts.Server, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.InvokeBatch(ctx, []tool.Call{call("t_slow", `{}`), call("t_slow", `{}`)})
		errc <- err
	}()
	receive(t, "the first call to start", ts.slowStarted)
	receive(t, "the second call to start", ts.slowStarted)
	cancel()
	if err := receive(t, "InvokeBatch to return", errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("InvokeBatch: %v, want context.Canceled", err)
	}
	receive(t, "the server to see the first cancellation", ts.slowCancelled)
	receive(t, "the server to see the second cancellation", ts.slowCancelled)
	// The session survives an interrupt.
	if out := okText(t, invoke(t, s, call("t_echo", `{"msg":"after"}`))[0]); out != "after" {
		t.Fatalf("output %q", out)
	}
}

func TestToolListChanged(t *testing.T) {
	ts := newTestServer(0)
	s := openMem(t, ts.Server, Config{})
	mcp.AddTool(ts.Server, &mcp.Tool{Name: "late", Description: "Added at runtime."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return text("late"), nil, nil
		})
	has := func(name string) bool {
		decls, _ := s.Tools(context.Background())
		return strings.Contains(","+names(decls)+",", ","+name+",")
	}
	eventually(t, "the new tool to be listed", func() bool { return has("t_late") })
	if out := okText(t, invoke(t, s, call("t_late", `{}`))[0]); out != "late" {
		t.Fatalf("output %q", out)
	}
	ts.RemoveTools("late")
	eventually(t, "the removed tool to go", func() bool { return !has("t_late") })
}

func TestToolsAndAnnotations(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	no := false
	srv.AddTool(&mcp.Tool{
		Name: "read", Title: "Read a file", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"p": map[string]any{"type": "string"}}},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text(""), nil })
	srv.AddTool(&mcp.Tool{Name: "plain", Description: "Plain.", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text(""), nil })
	s := openMem(t, srv, Config{Name: "fs"})
	decls, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tool.Decl{}
	for _, d := range decls {
		byName[d.Name] = d
	}
	read := byName["fs_read"]
	if read.Description != "Read a file" || !jsonEqual(t, read.InputSchema, `{"type":"object","properties":{"p":{"type":"string"}}}`) {
		t.Errorf("fs_read: %+v (schema %s)", read, read.InputSchema)
	}
	a, ok := s.Annotations("fs_read")
	if !ok || a == nil || !a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("fs_read annotations %+v, %v", a, ok)
	}
	if a, ok := s.Annotations("fs_plain"); !ok || a != nil {
		t.Errorf("fs_plain annotations %+v, %v", a, ok)
	}
	if _, ok := s.Annotations("fs_nothing"); ok {
		t.Error("an unknown tool has annotations")
	}
}
