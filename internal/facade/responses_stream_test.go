package facade_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/tool"
)

// postStream posts a streaming Responses body and returns its lines.
func postStream(t *testing.T, r *replica, body string, onLine func(string)) []string {
	t.Helper()
	req, _ := http.NewRequest("POST", r.url+"/v1/responses", strings.NewReader(body))
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
		if line != "" {
			lines = append(lines, line)
			if onLine != nil {
				onLine(line)
			}
		}
	}
	return lines
}

// eventTypes checks that each data line follows an event line naming its
// type, and returns the types.
func eventTypes(t *testing.T, lines []string) []string {
	t.Helper()
	var types []string
	for i, l := range lines {
		data, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || i == 0 || lines[i-1] != "event: "+ev.Type {
			t.Fatalf("line %d %q after %q", i, l, lines[max(i-1, 0)])
		}
		types = append(types, ev.Type)
	}
	return types
}

func TestResponsesKeepAliveWhileServerToolRuns(t *testing.T) {
	r, fake := newSQLite(t, func(d *api.Deps) { d.KeepAlive = 10 * time.Millisecond })
	release := make(chan struct{})
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
	released := false
	t.Cleanup(func() {
		if !released {
			close(release) // the stream failed: let the tool end
		}
	})
	fake.Push(llmtest.Turn{Text: "Working.", ToolCalls: []llmtest.ToolCall{{ID: "call_slow", Name: "slow", Args: `{}`}}}, llmtest.Turn{Text: "Finished."})
	lines := postStream(t, r, `{"model":"fake","stream":true,"input":"go"}`, func(l string) {
		if l == ": keep-alive" && !released {
			close(release) // a keep-alive came while the tool ran
			released = true
		}
	})
	types := eventTypes(t, lines)
	if !released || len(types) == 0 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Fatalf("stream: %q", lines)
	}
	// One lifecycle and one message item for both steps.
	count := map[string]int{}
	for _, ty := range types {
		count[ty]++
	}
	if count["response.created"] != 1 || count["response.completed"] != 1 || count["response.output_item.added"] != 1 {
		t.Fatalf("events %v", count)
	}
	var done struct {
		Response responses.Response `json:"response"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[len(lines)-1], "data: ")), &done); err != nil {
		t.Fatal(err)
	}
	if done.Response.OutputText() != "Working.\n\nFinished." {
		t.Fatalf("completed %s", lines[len(lines)-1])
	}
	for _, l := range lines {
		if strings.Contains(l, "call_slow") {
			t.Fatalf("a server-side call reached the client: %s", l)
		}
	}
}

func TestResponsesRunFailure(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(llmtest.Turn{Status: http.StatusBadRequest, ErrorMessage: "the provider refuses"})
	_, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "fake", Input: text("hi")})
	expectError(t, err, http.StatusInternalServerError, "server_error", "", "run_failed")

	fake.Push(llmtest.Turn{Status: http.StatusBadRequest, ErrorMessage: "the provider refuses"})
	lines := postStream(t, r, `{"model":"fake","stream":true,"input":"hi"}`, nil)
	types := eventTypes(t, lines)
	if len(types) != 3 || types[0] != "response.created" || types[2] != "response.failed" {
		t.Fatalf("stream: %q", lines)
	}
	var failed struct {
		Response responses.Response `json:"response"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[len(lines)-1], "data: ")), &failed); err != nil {
		t.Fatal(err)
	}
	if failed.Response.Status != "failed" || !strings.Contains(failed.Response.Error.Message, "the provider refuses") {
		t.Fatalf("failed %s", lines[len(lines)-1])
	}
}
