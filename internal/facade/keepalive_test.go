package facade_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/tool"
)

func TestKeepAliveWhileServerToolRuns(t *testing.T) {
	r, fake := newSQLite(t, func(d *api.Deps) { d.KeepAlive = 10 * time.Millisecond })
	release := make(chan struct{})
	released := false
	err := r.reg.AddTool(tool.Func(tool.Decl{Name: "slow", Description: "waits", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ tool.Call) (tool.Result, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return tool.JSON("done"), nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !released {
			close(release) // the stream failed: let the tool end
		}
	})
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_slow", Name: "slow", Args: `{}`}}}, llmtest.Turn{Text: "Finished."})

	body := `{"model":"fake","stream":true,"messages":[{"role":"user","content":"go"}]}`
	req, _ := http.NewRequest("POST", r.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.token("alice"))
	res, err := r.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("answer %d %s", res.StatusCode, ct)
	}
	var lines []string
	for line := range streamLines(t, res.Body, streamWait) {
		if line == "" {
			continue
		}
		lines = append(lines, line)
		if line == ": keep-alive" && !released {
			close(release) // a keep-alive came while the tool ran
			released = true
		}
		if strings.HasPrefix(line, "event:") {
			t.Fatalf("an event line: %s", line)
		}
	}
	if !released || len(lines) == 0 || lines[len(lines)-1] != "data: [DONE]" {
		t.Fatalf("stream: %q", lines)
	}
	finishes := 0
	for _, l := range lines {
		if strings.Contains(l, `"finish_reason":"stop"`) {
			finishes++
		}
		if strings.Contains(l, "call_slow") {
			t.Fatalf("a server-side call reached the client: %s", l)
		}
	}
	if finishes != 1 {
		t.Fatalf("%d finish reasons in %q", finishes, lines)
	}
}
