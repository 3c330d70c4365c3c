package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/mcptest"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/internal/tools/mcp"
)

// TestEverythingOverStdio and TestEverythingOverHTTP drive the MCP
// project's reference server through parley's HTTP API: a fake model calls
// four of its tools in one step, and the results reach the history (and the
// model) in call order, with the long-running call's progress on the stream.
func TestEverythingOverStdio(t *testing.T) {
	bin := mcptest.Everything(t)
	// The script starts with "#!/usr/bin/env node": the child needs PATH.
	runEverything(t, mcp.Config{Name: "everything", Command: []string{bin, "stdio"}, Env: map[string]string{"PATH": os.Getenv("PATH")}})
}

func TestEverythingOverHTTP(t *testing.T) {
	bin := mcptest.Everything(t)
	runEverything(t, mcp.Config{Name: "everything", URL: mcptest.StartEverythingHTTP(t, bin)})
}

func runEverything(t *testing.T, cfg mcp.Config) {
	cfg.CallTimeout = 30 * time.Second
	src := mcp.Open(cfg, mcp.Options{MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond})
	t.Cleanup(func() { _ = src.Close() })

	fake := llmtest.NewOpenAIChat(t)
	s := start(t, openSQLite(t, t.TempDir()), fake, func(reg *tools.Registry) {
		if err := reg.AddSource(context.Background(), src); err != nil {
			t.Fatal(err)
		}
	})
	want := []string{"everything_echo", "everything_get-sum", "everything_trigger-long-running-operation", "everything_get-structured-content"}
	s.waitTools(want...)

	fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: want[0], Args: `{"message":"hi parley"}`},
			{ID: "c2", Name: want[1], Args: `{"a":2,"b":3}`},
			{ID: "c3", Name: want[2], Args: `{"duration":0.3,"steps":3}`},
			{ID: "c4", Name: want[3], Args: `{"location":"Chicago"}`},
		}},
		llmtest.Turn{Text: "all done"},
	)
	var c chat.Chat
	if code := s.call("POST", "/api/v1/chats", map[string]any{"title": "mcp"}, &c); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	stream := s.openStream(c.ID)
	if code := s.call("POST", "/api/v1/chats/"+c.ID+"/messages", map[string]any{"content": "use the tools"}, nil); code >= 300 {
		t.Fatalf("post message: %d", code)
	}

	var progress []float64
	for range stream.until(t, chat.Running) {
	}
	for ev := range stream.until(t, chat.Waiting) {
		if ev.name != "part" {
			continue
		}
		var p struct {
			MessageID int64 `json:"message_id"`
			Part      struct {
				Type       string  `json:"type"`
				ToolCallID string  `json:"tool_call_id"`
				Progress   float64 `json:"progress"`
				Total      float64 `json:"total"`
			} `json:"part"`
		}
		if err := json.Unmarshal([]byte(ev.data), &p); err != nil {
			t.Fatal(err)
		}
		if p.Part.Type == "tool-progress" {
			if p.Part.ToolCallID != "c3" || p.Part.Total != 3 || p.MessageID == 0 {
				t.Errorf("progress event %s", ev.data)
			}
			progress = append(progress, p.Part.Progress)
		}
	}
	// The server reports steps 1, 2 and 3. The last report may be handled
	// after the result (the SDK delivers notifications on their own), and a
	// report after the result is dropped; the first two come while it runs.
	if len(progress) < 2 || progress[0] != 1 || progress[1] != 2 {
		t.Errorf("progress of the long-running call: %v, want 1, 2 (and maybe 3)", progress)
	}

	msgs := s.messages(c.ID)
	if len(msgs) != 4 || msgs[2].Role != chat.RoleTool || len(msgs[2].Parts) != 4 {
		t.Fatalf("history: %+v", msgs)
	}
	results := msgs[2].Parts
	for i, p := range results {
		if p.ToolCallID != fmt.Sprintf("c%d", i+1) || p.IsError {
			t.Errorf("result %d: %s %s error=%v: %s", i, p.ToolCallID, p.ToolName, p.IsError, p.Output)
		}
	}
	for i, sub := range []string{`"Echo: hi parley"`, `5`, `Long running operation completed`, `"structured":{"conditions":"Light rain / drizzle","humidity":82,"temperature":36}`} {
		if !strings.Contains(string(results[i].Output), sub) {
			t.Errorf("result of %s lacks %s: %s", results[i].ToolName, sub, results[i].Output)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "Echo: hi parley") {
		t.Fatalf("the model did not get the results: %d requests", len(reqs))
	}
}

// waitTools polls GET /api/v1/tools until every name is listed.
func (s *server) waitTools(names ...string) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var body struct {
			Tools   []tools.Decl
			Sources []tools.SourceInfo
		}
		s.call("GET", "/api/v1/tools", nil, &body)
		have := map[string]bool{}
		for _, d := range body.Tools {
			have[d.Name] = true
		}
		missing := 0
		for _, n := range names {
			if !have[n] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("tools %v not all listed; sources %+v", names, body.Sources)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sseEvent is one event of a chat stream.
type sseEvent struct{ name, data string }

type chatStream struct {
	res    *http.Response
	events chan sseEvent
}

// openStream subscribes to a chat's stream; the subscription is live when
// openStream returns (the response headers arrived).
func (s *server) openStream(id string) *chatStream {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/api/v1/chats/"+id+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		s.t.Fatalf("stream: %v %v", err, res)
	}
	cs := &chatStream{res: res, events: make(chan sseEvent, 256)}
	go func() {
		defer close(cs.events)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			case line == "" && ev.name != "":
				cs.events <- ev
				ev = sseEvent{}
			}
		}
	}()
	return cs
}

// until yields the stream's events up to the status event that shows the
// chat in want, failing the test if it does not come.
func (cs *chatStream) until(t *testing.T, want chat.Status) func(func(sseEvent) bool) {
	return func(yield func(sseEvent) bool) {
		timeout := time.After(30 * time.Second)
		for {
			select {
			case ev, ok := <-cs.events:
				if !ok {
					t.Fatal("the stream ended")
				}
				if ev.name == "status" {
					var st struct{ Status chat.Status }
					_ = json.Unmarshal([]byte(ev.data), &st)
					if st.Status == want {
						return
					}
				}
				if !yield(ev) {
					return
				}
			case <-timeout:
				t.Fatalf("no status %s on the stream", want)
			}
		}
	}
}
