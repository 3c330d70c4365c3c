package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestReplicaKilledWhileToolRuns runs two replicas on PostgreSQL and
// SIGKILLs the one whose worker is inside a server-side tool call: after
// the assistant message with the call was stored, before the call's result
// was. The tool is a Lua handler that makes an HTTP request to a gate the
// test holds, so the test knows the tool is running when it kills. The
// other replica recovers the chat once the lease expires and must answer
// the call with the "outcome unknown" result instead of running the tool
// again (it may have had its effect): the call ends with exactly that one
// result, the gate saw one request in all, the model's second request
// carries the result, and the chat ends waiting with the model's answer.
// Every chat's history is checked once the replicas have stopped.
func TestReplicaKilledWhileToolRuns(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	gate := newToolGate(t)
	fake := llmtest.NewOpenAIChat(t)
	const (
		callID = "call_effect"
		answer = "the effect may or may not have happened; I will check before trying again"
	)
	fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: callID, Name: "irreversible_effect", Args: `{"what":"send the invoice"}`}}},
		llmtest.Turn{Text: answer},
	)
	dir := t.TempDir()
	a, b := startReplicas(t, dir, dsn, toolReplicaConfig(t, dir, fake.URL, gate.url))
	id := createChatWith(t, a, "send the invoice")

	// The tool runs on the holder: the gate has its request and keeps it.
	gate.waitHit(t)
	held, other := holder(t, dsn, id, a, b)

	// While the holder lives and the gate holds, nothing moves: the call is
	// stored, its result is not.
	hist := history(t, other, a.Token, id)
	if len(hist) != 2 || hist[0].Role != chat.RoleUser || hist[1].Role != chat.RoleAssistant ||
		len(hist[1].Parts) != 1 || hist[1].Parts[0].Type != chat.PartToolCall || hist[1].Parts[0].ToolCallID != callID {
		t.Fatalf("history while the tool runs, want the question and the stored call only: %+v", hist)
	}
	callMsg := hist[1].ID
	evs := chatEvents(t, other.URL+"/api/v1/chats/"+id+"/stream?after="+strconv.FormatInt(callMsg, 10), a.Token)

	if err := held.Cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	killed := time.Now()
	held.Wait()
	// The tool's HTTP request died with the process: the call was cut off
	// while it ran, not after it returned.
	gate.waitGone(t)

	msgs, _ := followUntilWaiting(t, evs, recoveryLimit)
	t.Logf("the other replica finished the chat %v after the SIGKILL (lease_ttl 2s, heartbeat and poll 500ms)", time.Since(killed).Round(time.Millisecond))
	if len(msgs) != 2 || msgs[0].Role != chat.RoleTool || msgs[1].Role != chat.RoleAssistant || msgText(msgs[1]) != answer {
		t.Fatalf("messages on the stream after the kill, want the call's result and the answer: %+v", msgs)
	}
	checkUnknownOutcome(t, msgs[0], callID)

	// The same through the API: the call has exactly one result.
	code, body := get(t, other.URL+"/api/v1/chats/"+id, a.Token)
	var c chat.Chat
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil || c.Status != chat.Waiting || c.LastError != nil {
		t.Errorf("chat after recovery: %d %s", code, body)
	}
	hist = history(t, other, a.Token, id)
	results := 0
	for _, m := range hist {
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult && p.ToolCallID == callID {
				results++
			}
		}
	}
	if len(hist) != 4 || hist[1].ID != callMsg || hist[2].Role != chat.RoleTool || msgText(hist[3]) != answer || results != 1 {
		t.Errorf("history after recovery, want question, call, one result, answer (%d results of %s):\n%+v", results, callID, hist)
	}

	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2 (the call, then the answer)", len(reqs))
	}
	if sent := toolMessagesSent(t, reqs[1].Body); len(sent) != 1 || sent[0].ToolCallID != callID || !strings.Contains(sent[0].Content, chat.ReasonUnknownOutcome) {
		t.Errorf("the model's second request carries tool results %+v, want one for %s saying %q", sent, callID, chat.ReasonUnknownOutcome)
	}
	if !strings.Contains(other.Stderr.String(), "recovered a chat whose worker") {
		t.Errorf("the other replica did not log the recovery\nstderr:\n%s", other.Stderr)
	}
	if code := other.Stop(); code != 0 {
		t.Errorf("the other replica exited %d\nstderr:\n%s", code, other.Stderr)
	}
	// Both processes have ended: the tool ran once, on the killed replica.
	if n := gate.hits(); n != 1 {
		t.Errorf("the tool ran %d times, want once (the recovering replica must not run it again)", n)
	}
	// A store of the test's own on the same database, whose cleanup checks
	// every chat's history (invariant.Check) now that no replica writes.
	pgtest.Store(t, dsn)
}

// checkUnknownOutcome checks that m answers exactly the call callID, as an
// error whose output says the outcome is unknown.
func checkUnknownOutcome(t *testing.T, m chat.Message, callID string) {
	t.Helper()
	if len(m.Parts) != 1 {
		t.Fatalf("the tool message has %d parts, want 1: %+v", len(m.Parts), m)
	}
	p := m.Parts[0]
	var out string
	if p.Type != chat.PartToolResult || p.ToolCallID != callID || p.ToolName != "irreversible_effect" || !p.IsError ||
		json.Unmarshal(p.Output, &out) != nil || out != chat.ReasonUnknownOutcome {
		t.Errorf("the killed call's result: %s %s of %s, error %v, output %s; want an error result of %s saying %q",
			p.Type, p.ToolCallID, p.ToolName, p.IsError, p.Output, callID, chat.ReasonUnknownOutcome)
	}
}

// history returns every message of a chat through r's API.
func history(t *testing.T, r *replica, token, id string) []chat.Message {
	t.Helper()
	code, body := get(t, r.URL+"/api/v1/chats/"+id+"/messages", token)
	var page struct{ Messages []chat.Message }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("messages: %d %s", code, body)
	}
	return page.Messages
}

// toolMessageSent is a tool message of a Chat Completions request.
type toolMessageSent struct {
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

// toolMessagesSent returns the tool messages of a Chat Completions request
// body, in order.
func toolMessagesSent(t *testing.T, body json.RawMessage) []toolMessageSent {
	t.Helper()
	var req struct {
		Messages []struct {
			Role string `json:"role"`
			toolMessageSent
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("model request %s: %v", body, err)
	}
	var out []toolMessageSent
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out = append(out, m.toolMessageSent)
		}
	}
	return out
}

// toolGate is the HTTP endpoint the test's Lua tool calls. It counts the
// requests and holds each one until its client goes away or the test ends,
// so a tool call stays in flight for as long as the test wants.
type toolGate struct {
	url     string
	mu      sync.Mutex
	n       int
	hit     chan struct{} // a token per request
	gone    chan struct{} // a token per request whose client went away
	release chan struct{} // closed when the test ends
}

// newToolGate starts a gate, released and closed when the test ends.
func newToolGate(t *testing.T) *toolGate {
	t.Helper()
	g := &toolGate{hit: make(chan struct{}, 16), gone: make(chan struct{}, 16), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: the server notices a client that went away
		// (and cancels the request's context) only once the body is read.
		io.Copy(io.Discard, r.Body)
		g.mu.Lock()
		g.n++
		g.mu.Unlock()
		g.hit <- struct{}{}
		select {
		case <-r.Context().Done():
			g.gone <- struct{}{}
		case <-g.release:
			fmt.Fprint(w, `{"done":true}`)
		}
	}))
	// Registered after Close, so it runs first: Close waits for the
	// handlers, which wait for release.
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(g.release) })
	g.url = srv.URL
	return g
}

// hits returns how many requests the gate has had.
func (g *toolGate) hits() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// waitHit waits for a request to reach the gate.
func (g *toolGate) waitHit(t *testing.T) {
	t.Helper()
	select {
	case <-g.hit:
	case <-time.After(deadline):
		t.Fatal("the tool did not reach the gate before the deadline")
	}
}

// waitGone waits for the client of a held request to go away.
func (g *toolGate) waitGone(t *testing.T) {
	t.Helper()
	select {
	case <-g.gone:
	case <-time.After(deadline):
		t.Fatal("the tool's request to the gate did not end after its process was killed")
	}
}

// toolReplicaConfig writes a configuration like replicaConfig's (the
// OpenAI-compatible fake at fakeURL, a lease of 2 s) with one Lua tool,
// irreversible_effect, whose handler POSTs to gateURL and returns the
// answer, and returns its path.
func toolReplicaConfig(t *testing.T, dir, fakeURL, gateURL string) string {
	t.Helper()
	script := fmt.Sprintf(`tool{
  name = "irreversible_effect",
  description = "Does something that cannot be undone, and takes a while.",
  input_schema = {properties = {what = {type = "string"}}},
  handler = function(input, call)
    local resp, err = http.request{method = "POST", url = %q .. "/effect?call=" .. call.id, body = json.encode(input), timeout = 60}
    if not resp then return nil, err end
    return json.decode(resp.body)
  end,
}
`, gateURL)
	scriptPath := filepath.Join(dir, "effect.lua")
	if err := os.WriteFile(scriptPath, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := replicaConfig(t, dir, fakeURL, "2s")
	base, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tools := fmt.Sprintf(`tools:
  lua:
    - name: effects
      path: %s
  lua_runtime:
    call_timeout: 60s
    batch_timeout: 60s
    http_allow_hosts: ["127.0.0.1"]
    reload_interval: 0s
`, scriptPath)
	if err := os.WriteFile(cfg, append(base, tools...), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}
