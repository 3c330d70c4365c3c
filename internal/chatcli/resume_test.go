package chatcli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
)

// waitAfter waits until o holds s after the first marker.
func (p *chatProc) waitAfter(o *output, marker, s string) {
	p.t.Helper()
	printed := func(text string) bool {
		_, after, ok := strings.Cut(text, marker)
		return ok && strings.Contains(after, s)
	}
	if held, ended := o.Wait(printed, p.exited, deadline); !held {
		p.t.Fatalf("the session did not print %q after %q (ended: %v)\nstderr:\n%s", s, marker, ended, p.stderr)
	}
}

// pendingAction reads the chat's required_action from the API.
func (s *server) pendingAction(t *testing.T, id string) client.RequiredAction {
	t.Helper()
	code, body := do(t, http.MethodGet, s.url+"/api/v1/chats/"+id, s.token, "")
	var ch client.Chat
	if code != 200 || json.Unmarshal([]byte(body), &ch) != nil || ch.RequiredAction == nil || len(ch.RequiredAction.ToolCalls) != 1 {
		t.Fatalf("chat %s does not wait for one call: %d %s", id, code, body)
	}
	return *ch.RequiredAction
}

// TestChatResumeAsksPendingCalls: a session continuing a chat that
// waits for a dynamic tool's result, or for an approval, shows the call and
// asks about it at once, before any message prompt; the answer streams,
// then the message prompt comes. With a MESSAGE, the message is sent once
// the chat answered the call, not queued behind it.
func TestChatResumeAsksPendingCalls(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil, nil)
	access := Options{URL: s.url, Token: s.token}
	with := func(f func(*Options)) Options { o := access; f(&o); return o }
	tool := with(func(o *Options) { o.Tools = []client.DynamicTool{weather("")} })
	resume := func(id string) Options { return with(func(o *Options) { o.ChatID = id }) }

	// A chat left waiting for a result: the first session's input ended.
	p := startChat(t, tool, `/call get_weather {"city":"Lima"}`)
	id := p.waitChatID()
	if err := p.wait(); err == nil || !strings.Contains(err.Error(), "end of input while tool call") {
		t.Fatalf("first session: %v, stderr:\n%s", err, p.stderr)
	}

	p = startChat(t, resume(id))
	p.waitFor(p.stderr, `tool call get_weather {"city":"Lima"}`+"\nresult (JSON, text, or !error TEXT; by ")
	if before, _, _ := strings.Cut(p.stderr.String(), "tool call get_weather"); strings.Contains(before, "> ") {
		t.Fatalf("a message prompt came before the pending call:\n%s", p.stderr)
	}
	p.send(`{"temp_c": 18}`)
	p.waitFor(p.stdout, `tool get_weather returned {"temp_c":18}`+"\n")
	p.waitFor(p.stderr, "\n> ")
	p.send("thanks")
	p.waitFor(p.stdout, "echo: thanks\n")
	if err := p.wait(); err != nil {
		t.Fatalf("the continued session ended with %v\nstderr:\n%s", err, p.stderr)
	}
	if got, want := p.stdout.String(), "tool get_weather returned {\"temp_c\":18}\necho: thanks\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}

	// With a MESSAGE: the call first, then the message, answered in turn.
	p = startChat(t, resume(id), `/call get_weather {"city":"Quito"}`)
	if err := p.wait(); err == nil || !strings.Contains(err.Error(), "end of input while tool call") {
		t.Fatalf("second call: %v, stderr:\n%s", err, p.stderr)
	}
	p = startChat(t, resume(id), "and after?")
	p.waitFor(p.stderr, `tool call get_weather {"city":"Quito"}`)
	p.send("7")
	if err := p.wait(); err != nil {
		t.Fatalf("the continued session with a message ended with %v\nstderr:\n%s", err, p.stderr)
	}
	if got, want := p.stdout.String(), "tool get_weather returned 7\necho: and after?\n"; got != want || strings.Contains(p.stderr.String(), "queued") {
		t.Errorf("stdout %q, want %q; stderr:\n%s", got, want, p.stderr)
	}

	// A chat left waiting for an approval.
	p = startChat(t, with(func(o *Options) { o.Approve = []string{"current_time"} }), `/call current_time {}`)
	id = p.waitChatID()
	if err := p.wait(); err == nil || !strings.Contains(err.Error(), "waits for your decision") {
		t.Fatalf("approval session: %v, stderr:\n%s", err, p.stderr)
	}
	p = startChat(t, resume(id))
	p.waitFor(p.stderr, "tool call current_time needs your approval (source builtin)\n")
	p.waitFor(p.stderr, "approve? [y/n/e(dit)] ")
	if before, _, _ := strings.Cut(p.stderr.String(), "tool call current_time"); strings.Contains(before, "> ") {
		t.Fatalf("a message prompt came before the pending approval:\n%s", p.stderr)
	}
	p.send("y")
	p.waitFor(p.stdout, `tool current_time returned {"time":"`)
	p.waitFor(p.stderr, "\n> ")
	p.send("/exit")
	if err := p.wait(); err != nil {
		t.Fatalf("the continued session (approval) ended with %v\nstderr:\n%s", err, p.stderr)
	}
}

// TestChatCallsMoveOn: the result prompt shows the deadline (local time,
// time left); when the chat moves on while the person is asked (another
// client answers the call, or decides on an approval, or the deadline
// passes), the session says so at once, without waiting for input, shows
// what came of the call, and goes back to the message prompt.
func TestChatCallsMoveOn(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil, nil)

	t.Run("another client answers", func(t *testing.T) {
		t.Parallel()
		p := startChat(t, Options{URL: s.url, Token: s.token, Tools: []client.DynamicTool{weather("")}})
		p.send(`/call get_weather {"city":"Paris"}`)
		id := p.waitChatID()
		p.waitFor(p.stderr, `tool call get_weather {"city":"Paris"}`+"\nresult (JSON, text, or !error TEXT; by ")
		p.waitFor(p.stderr, " left)> ")
		ra := s.pendingAction(t, id)
		local := ra.Deadline.Local()
		when := local.Format("15:04:05")
		if local.YearDay() != time.Now().YearDay() { // the prompt adds the date
			when = local.Format("Jan 2 15:04:05")
		}
		m := regexp.MustCompile(`; by (.+), (\S+) left\)> `).FindStringSubmatch(p.stderr.String())
		if m == nil || m[1] != when {
			t.Fatalf("the prompt does not show the deadline %s (%s local):\n%s", ra.Deadline, when, p.stderr)
		}
		if left, err := time.ParseDuration(m[2]); err != nil || left <= 0 || left > 10*time.Minute {
			t.Errorf("time left %q: want up to the default 10m", m[2])
		}

		body := fmt.Sprintf(`{"results":[{"tool_call_id":%q,"output":{"temp_c":5}}]}`, ra.ToolCalls[0].ToolCallID)
		if code, b := do(t, http.MethodPost, s.url+"/api/v1/chats/"+id+"/tool-results", s.token, body); code != 200 {
			t.Fatalf("tool-results: %d %s", code, b)
		}
		p.waitFor(p.stderr, "the chat moved on: another client answered\n")
		p.waitFor(p.stderr, `tool get_weather: {"temp_c":5}`+"\n")
		p.waitFor(p.stdout, `tool get_weather returned {"temp_c":5}`+"\n")
		p.waitAfter(p.stderr, "the chat moved on", "\n> ")
		p.send("thanks")
		p.waitFor(p.stdout, "echo: thanks\n")
		if err := p.wait(); err != nil {
			t.Fatalf("the session ended with %v\nstderr:\n%s", err, p.stderr)
		}
		if got, want := p.stdout.String(), "tool get_weather returned {\"temp_c\":5}\necho: thanks\n"; got != want {
			t.Errorf("stdout %q, want %q", got, want)
		}
	})

	t.Run("another client decides", func(t *testing.T) {
		t.Parallel()
		p := startChat(t, Options{URL: s.url, Token: s.token, Approve: []string{"current_time"}})
		p.send(`/call current_time {}`)
		id := p.waitChatID()
		p.waitFor(p.stderr, "(decide by ")
		p.waitFor(p.stderr, "approve? [y/n/e(dit)] ")
		ra := s.pendingAction(t, id)
		body := fmt.Sprintf(`{"decisions":[{"tool_call_id":%q,"approve":false,"reason":"not now"}]}`, ra.ToolCalls[0].ToolCallID)
		if code, b := do(t, http.MethodPost, s.url+"/api/v1/chats/"+id+"/approvals", s.token, body); code != 200 {
			t.Fatalf("approvals: %d %s", code, b)
		}
		p.waitFor(p.stderr, "the chat moved on: another client decided")
		p.waitFor(p.stdout, "tool current_time failed: denied: not now\n")
		p.send("ok")
		p.waitFor(p.stdout, "echo: ok\n")
		if err := p.wait(); err != nil {
			t.Fatalf("the session ended with %v\nstderr:\n%s", err, p.stderr)
		}
	})

	t.Run("the deadline passes", func(t *testing.T) {
		t.Parallel()
		p := startChat(t, Options{URL: s.url, Token: s.token, Tools: []client.DynamicTool{weather("")}, ToolTimeout: time.Second})
		p.send(`/call get_weather {"city":"Oslo"}`)
		p.waitFor(p.stderr, `tool call get_weather {"city":"Oslo"}`)
		p.waitFor(p.stderr, "the chat moved on: the deadline passed\n")
		p.waitFor(p.stdout, "tool get_weather failed: no result before deadline\n")
		p.send("too late")
		p.waitFor(p.stdout, "echo: too late\n")
		if err := p.wait(); err != nil {
			t.Fatalf("the session ended with %v\nstderr:\n%s", err, p.stderr)
		}
		if got, want := p.stdout.String(), "tool get_weather failed: no result before deadline\necho: too late\n"; got != want {
			t.Errorf("stdout %q, want %q", got, want)
		}
		if strings.Contains(p.stderr.String(), "before deadline") {
			t.Errorf("stderr repeats the deadline's result after saying the deadline passed:\n%s", p.stderr)
		}
	})
}
