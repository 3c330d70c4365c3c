package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley/client"
)

// TestChatApprovalServe: "parley chat --approve current_time" against a
// real "parley serve" (SQLite, the echo model): the call of the built-in
// current_time waits for the person at the terminal. Approved, it runs and
// its result reaches the output; approved with edited arguments the server
// refuses (they fail the tool's schema), the server's reason is shown and
// the decision asked again; approved with valid edited arguments, the tool
// runs with them. A second "parley chat --chat" on the same chat (which
// keeps its approve list) denies a call with a reason, which reaches the
// model. The history keeps each decision, with who took it.
func TestChatApprovalServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, nil)
	const prompt = "approve? [y/n/e(dit)] "
	p := startChat(t, dir, nil, "--url", s.URL, "--token", s.Token, "--approve", "current_time")

	p.send("/call current_time {}")
	p.waitFor(p.stderr, "tool call current_time needs your approval (source builtin)\n"+
		"  Returns the current date and time, in UTC or in the given IANA time zone.\n"+
		"  args: {}\n"+prompt)
	p.send("y")
	p.waitFor(p.stdout, `tool current_time returned {"time":"`)
	p.waitFor(p.stdout, `"timezone":"UTC","unix":`)

	p.send(`/call current_time {"timezone": "UTC"}`)
	p.waitFor(p.stderr, "  args: {\n    \"timezone\": \"UTC\"\n  }\n"+prompt)
	p.send("e")
	p.waitFor(p.stderr, "args> ")
	p.send(`{"timezone": 5}`)
	p.waitFor(p.stderr, "the server refused the decisions: ")
	p.waitFor(p.stderr, "decide again:\n")
	p.waitCount(p.stderr, "  args: {\n    \"timezone\": \"UTC\"\n  }\n"+prompt, 2)
	p.send("e")
	p.send(`{"timezone": "Europe/Paris"}`)
	p.waitFor(p.stdout, `"timezone":"Europe/Paris"`)
	if code := p.wait(); code != 0 {
		t.Fatalf("chat exited %d at the end of input\nstderr:\n%s", code, p.stderr)
	}
	_, refusal, _ := strings.Cut(p.stderr.String(), "the server refused the decisions: ")
	refusal, _, _ = strings.Cut(refusal, "\n")
	if !strings.Contains(refusal, "call_2") || !strings.Contains(refusal, "'/timezone': got number, want string") {
		t.Errorf("the refusal does not name the call and what is wrong with its args: %q", refusal)
	}
	m := chatIDLine.FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no chat id in stderr:\n%s", p.stderr)
	}
	id := m[1]

	// A second run on the same chat: its calls of current_time still wait.
	p = startChat(t, dir, nil, "--url", s.URL, "--token", s.Token, "--chat", id)
	p.send(`/call current_time {"timezone": "Asia/Tokyo"}`)
	p.waitFor(p.stderr, "tool call current_time needs your approval (source builtin)\n")
	p.waitFor(p.stderr, prompt)
	p.send("n")
	p.waitFor(p.stderr, "reason (optional)> ")
	p.send("  not in Tokyo  ")
	p.waitFor(p.stdout, "tool current_time failed: denied: not in Tokyo\n")
	p.send("thanks")
	p.waitFor(p.stdout, "echo: thanks\n")
	if code := p.wait(); code != 0 {
		t.Fatalf("second chat exited %d at the end of input\nstderr:\n%s", code, p.stderr)
	}
	if got, want := p.stdout.String(), "tool current_time failed: denied: not in Tokyo\necho: thanks\n"; got != want {
		t.Errorf("second chat's stdout\n%s\nwant\n%s", got, want)
	}

	// The history, through the API.
	code, body := get(t, s.URL+"/api/v1/chats/"+id, s.Token)
	var ch client.Chat
	if code != 200 || json.Unmarshal([]byte(body), &ch) != nil || len(ch.Approve) != 1 || ch.Approve[0] != "current_time" || ch.Status != client.StatusWaiting {
		t.Fatalf("chat: %d %s", code, body)
	}
	code, body = get(t, s.URL+"/api/v1/chats/"+id+"/messages", s.Token)
	var page struct {
		Messages []client.Message `json:"messages"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("messages: %d %s", code, body)
	}
	var decisions, results []client.Part
	for _, msg := range page.Messages {
		for _, part := range msg.Parts {
			switch part.Type {
			case client.PartToolDecision:
				decisions = append(decisions, part)
			case client.PartToolResult:
				results = append(results, part)
			}
		}
	}
	if len(decisions) != 3 || len(results) != 3 {
		t.Fatalf("%d tool-decision and %d tool-result parts, want 3 each (the refused decision is not kept):\n%s", len(decisions), len(results), body)
	}
	for i, want := range []struct {
		approved bool
		reason   string
		args     string
	}{{true, "", ""}, {true, "", `{"timezone":"Europe/Paris"}`}, {false, "not in Tokyo", ""}} {
		d := decisions[i]
		if d.Decision == nil || d.ToolCallID != results[i].ToolCallID || d.ToolName != "current_time" ||
			d.Decision.Approved != want.approved || d.Decision.Reason != want.reason || string(d.Args) != want.args ||
			d.Decision.DecidedBy != ch.Owner || d.Decision.Token == "" || d.Decision.DecidedAt.IsZero() {
			t.Errorf("decision %d: %+v %+v, want approved %v, reason %q, args %q, by %s", i, d, d.Decision, want.approved, want.reason, want.args, ch.Owner)
		}
	}
	if results[0].IsError || !strings.Contains(string(results[0].Output), `"timezone":"UTC"`) ||
		results[1].IsError || !strings.Contains(string(results[1].Output), `"timezone":"Europe/Paris"`) ||
		!results[2].IsError || string(results[2].Output) != `"denied: not in Tokyo"` {
		t.Errorf("results %+v", results)
	}
}
