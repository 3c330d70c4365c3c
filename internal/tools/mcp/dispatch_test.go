package mcp

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// dispatcher returns a dispatcher whose one source is s.
func dispatcher(t *testing.T, s *Source, opts tools.Options) *tools.Dispatcher {
	t.Helper()
	reg := tools.NewRegistry(testLogger(t))
	if err := reg.AddSource(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return tools.NewDispatcher(reg, opts, testLogger(t))
}

// partText returns a result part's output, which must be a JSON string.
func partText(t *testing.T, p chat.Part) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(p.Output, &s); err != nil {
		t.Fatalf("output %s of %s is not a JSON string", p.Output, p.ToolCallID)
	}
	return s
}

// A server killed while the third call of a step waits: the two calls that
// had returned keep their results, the third gets the failure, and the step
// is still a failure of the source.
func TestSessionLostKeepsTheResultsThatCame(t *testing.T) {
	// One call at a time: the third starts once the first two returned.
	s := openChild(t, "serve", Config{MaxConcurrency: 1})
	waitConnected(t, s)
	pid := childPID(t, s)
	var kill sync.Once
	step := tools.Step{
		ChatID: "chat",
		Calls: []chat.ToolCall{
			{ToolCallID: "1", ToolName: "c_pid", Args: json.RawMessage(`{}`)},
			{ToolCallID: "2", ToolName: "c_env", Args: json.RawMessage(`{}`)},
			{ToolCallID: "3", ToolName: "c_block", Args: json.RawMessage(`{}`)},
		},
		// c_block reports progress when it has arrived: then kill the server.
		Progress: func(c chat.ToolCall, _ tool.Progress) {
			if c.ToolName == "c_block" {
				kill.Do(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			}
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := dispatcher(t, s, tools.Options{}).Run(ctx, step)

	if len(out.Results) != 3 {
		t.Fatalf("%d results", len(out.Results))
	}
	if r := out.Results[0]; r.IsError || partText(t, r) != strconv.Itoa(pid) {
		t.Errorf("call 1: %s (error %v), want the pid %d", r.Output, r.IsError, pid)
	}
	if r := out.Results[1]; r.IsError || partText(t, r) == "" {
		t.Errorf("call 2: %s (error %v), want the environment", r.Output, r.IsError)
	}
	r := out.Results[2]
	if msg := partText(t, r); !r.IsError || !strings.Contains(msg, "session lost") || !strings.Contains(msg, "may have run") {
		t.Errorf("call 3: %s (error %v), want a lost session that may have run", r.Output, r.IsError)
	}
	if len(out.Failures) != 1 || out.Failures[0].Source != "c" || !strings.Contains(out.Failures[0].Error(), "session lost") {
		t.Errorf("failures %v, want the lost session of c", out.Failures)
	}
}

// A step whose calls each end within call_timeout is not cut by the
// dispatcher's default batch bound, however long they take together: the
// bound of an MCP batch comes from call_timeout and max_concurrency.
func TestSlowBatchWithinCallTimeouts(t *testing.T) {
	const bound = 100 * time.Millisecond // the dispatcher's default, shrunk
	ts := newTestServer(0)
	s := openMem(t, ts.Server, Config{MaxConcurrency: 1, CallTimeout: 30 * time.Second})
	d := dispatcher(t, s, tools.Options{BatchTimeout: bound})
	step := tools.Step{ChatID: "chat", Calls: []chat.ToolCall{
		{ToolCallID: "1", ToolName: "t_gauge", Args: json.RawMessage(`{}`)},
		{ToolCallID: "2", ToolName: "t_gauge", Args: json.RawMessage(`{}`)},
	}}
	done := make(chan tools.Outcome, 1)
	go func() { done <- d.Run(context.Background(), step) }()
	// The first call ends once the default bound has passed since it began
	// (the batch began before), the second at once; a step that ends first
	// was cut.
	var out tools.Outcome
	ended := false
	for i := 0; i < 2 && !ended; i++ {
		select {
		case <-ts.gaugeArrived:
		case out = <-done:
			ended = true
			continue
		}
		if i == 0 {
			<-time.After(bound)
		}
		select {
		case ts.gaugeRelease <- struct{}{}:
		case out = <-done:
			ended = true
		}
	}
	if !ended {
		out = receive(t, "the step", done)
	}
	if len(out.Failures) != 0 {
		t.Fatalf("failures %v", out.Failures)
	}
	for _, r := range out.Results {
		if r.IsError || partText(t, r) != "released" {
			t.Errorf("call %s: %s (error %v)", r.ToolCallID, r.Output, r.IsError)
		}
	}
}

func TestBatchTimeout(t *testing.T) {
	cases := []struct {
		cfg  Config
		n    int
		want time.Duration
	}{
		{Config{}, 0, 70 * time.Second},  // defaults: 32 at a time, 60s each, plus 10s
		{Config{}, 32, 70 * time.Second}, // one round
		{Config{}, 33, 130 * time.Second},
		{Config{MaxConcurrency: 2, CallTimeout: time.Second}, 5, 13 * time.Second},
	}
	for _, tc := range cases {
		s := &Source{cfg: tc.cfg.withDefaults()}
		if got := s.BatchTimeout(tc.n); got != tc.want {
			t.Errorf("%+v, %d calls: %v, want %v", tc.cfg, tc.n, got, tc.want)
		}
	}
}
