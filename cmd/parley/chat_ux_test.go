package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/chatcli"
)

// newChatID matches the id a session prints when it creates a chat.
var newChatID = regexp.MustCompile(`chat ([0-9a-f-]{36})\n`)

// writeWeatherSchema writes the get_weather schema in dir and returns the
// --tool flag value that declares it.
func writeWeatherSchema(t *testing.T, dir string) string {
	t.Helper()
	schema := filepath.Join(dir, "weather.json")
	if err := os.WriteFile(schema, []byte(weatherSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	return "get_weather=" + schema
}

// waitChatID waits until the session printed the id of the chat it created.
func (p *chatProc) waitChatID() string {
	p.t.Helper()
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	for {
		if m := newChatID.FindStringSubmatch(p.stderr.String()); m != nil {
			return m[1]
		}
		select {
		case <-p.stderr.changed:
		case <-p.exited:
			p.t.Fatalf("chat exited without naming its chat\nstderr:\n%s", p.stderr)
		case <-timeout.C:
			p.t.Fatalf("chat named no chat\nstderr:\n%s", p.stderr)
		}
	}
}

// waitAfter waits until o holds s after the first marker.
func (p *chatProc) waitAfter(o *output, marker, s string) {
	p.t.Helper()
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	for {
		if _, after, ok := strings.Cut(o.String(), marker); ok && strings.Contains(after, s) {
			return
		}
		select {
		case <-o.changed:
		case <-p.exited:
			p.t.Fatalf("chat exited without printing %q after %q\nstderr:\n%s", s, marker, p.stderr)
		case <-timeout.C:
			p.t.Fatalf("chat did not print %q after %q\nstderr:\n%s", s, marker, p.stderr)
		}
	}
}

// pendingAction reads the chat's required_action from the API.
func (s *server) pendingAction(t *testing.T, id string) client.RequiredAction {
	t.Helper()
	code, body := get(t, s.url+"/api/v1/chats/"+id, s.token)
	var ch client.Chat
	if code != 200 || json.Unmarshal([]byte(body), &ch) != nil || ch.RequiredAction == nil || len(ch.RequiredAction.ToolCalls) != 1 {
		t.Fatalf("chat %s does not wait for one call: %d %s", id, code, body)
	}
	return *ch.RequiredAction
}

// TestChatResumeAsksPendingCalls: "parley chat --chat ID" on a chat that
// waits for a dynamic tool's result, or for an approval, shows the call and
// asks about it at once, before any message prompt; the answer streams,
// then the message prompt comes. With a MESSAGE, the message is sent once
// the chat answered the call, not queued behind it.
func TestChatResumeAsksPendingCalls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, nil)
	tool := writeWeatherSchema(t, dir)
	access := []string{"--url", s.url, "--token", s.token}

	// A chat left waiting for a result: the first session's input ended.
	r := runParley(t, dir, nil, append([]string{"chat", "--tool", tool}, append(access, `/call get_weather {"city":"Lima"}`)...)...)
	m := chatIDLine.FindStringSubmatch(r.stderr)
	if r.code != 1 || m == nil || !strings.Contains(r.stderr, "end of input while tool call") {
		t.Fatalf("first session: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	id := m[1]

	p := startChat(t, dir, nil, append(access, "--chat", id)...)
	p.waitFor(p.stderr, `tool call get_weather {"city":"Lima"}`+"\nresult (JSON, text, or !error TEXT; by ")
	if before, _, _ := strings.Cut(p.stderr.String(), "tool call get_weather"); strings.Contains(before, "> ") {
		t.Fatalf("a message prompt came before the pending call:\n%s", p.stderr)
	}
	p.send(`{"temp_c": 18}`)
	p.waitFor(p.stdout, `tool get_weather returned {"temp_c":18}`+"\n")
	p.waitFor(p.stderr, "\n> ")
	p.send("thanks")
	p.waitFor(p.stdout, "echo: thanks\n")
	if code := p.wait(); code != 0 {
		t.Fatalf("chat --chat exited %d\nstderr:\n%s", code, p.stderr)
	}
	if got, want := p.stdout.String(), "tool get_weather returned {\"temp_c\":18}\necho: thanks\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}

	// With a MESSAGE: the call first, then the message, answered in turn.
	r = runParley(t, dir, nil, append([]string{"chat", "--chat", id}, append(access, `/call get_weather {"city":"Quito"}`)...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "end of input while tool call") {
		t.Fatalf("second call: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	p = startChat(t, dir, nil, append(access, "--chat", id, "and after?")...)
	p.waitFor(p.stderr, `tool call get_weather {"city":"Quito"}`)
	p.send("7")
	if code := p.wait(); code != 0 {
		t.Fatalf("chat --chat MESSAGE exited %d\nstderr:\n%s", code, p.stderr)
	}
	if got, want := p.stdout.String(), "tool get_weather returned 7\necho: and after?\n"; got != want || strings.Contains(p.stderr.String(), "queued") {
		t.Errorf("stdout %q, want %q; stderr:\n%s", got, want, p.stderr)
	}

	// A chat left waiting for an approval.
	r = runParley(t, dir, nil, append([]string{"chat", "--approve", "current_time"}, append(access, `/call current_time {}`)...)...)
	m = chatIDLine.FindStringSubmatch(r.stderr)
	if r.code != 1 || m == nil || !strings.Contains(r.stderr, "waits for your decision") {
		t.Fatalf("approval session: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	p = startChat(t, dir, nil, append(access, "--chat", m[1])...)
	p.waitFor(p.stderr, "tool call current_time needs your approval (source builtin)\n")
	p.waitFor(p.stderr, "approve? [y/n/e(dit)] ")
	if before, _, _ := strings.Cut(p.stderr.String(), "tool call current_time"); strings.Contains(before, "> ") {
		t.Fatalf("a message prompt came before the pending approval:\n%s", p.stderr)
	}
	p.send("y")
	p.waitFor(p.stdout, `tool current_time returned {"time":"`)
	p.waitFor(p.stderr, "\n> ")
	p.send("/exit")
	if code := p.wait(); code != 0 {
		t.Fatalf("chat --chat (approval) exited %d\nstderr:\n%s", code, p.stderr)
	}
}

// TestChatCallsMoveOn: the result prompt shows the deadline (local time,
// time left); when the chat moves on while the person is asked (another
// client answers the call, or decides on an approval, or the deadline
// passes), the session says so at once, without waiting for input, shows
// what came of the call, and goes back to the message prompt.
func TestChatCallsMoveOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, nil)
	tool := writeWeatherSchema(t, dir)

	t.Run("another client answers", func(t *testing.T) {
		t.Parallel()
		p := startChat(t, dir, nil, "--url", s.url, "--token", s.token, "--tool", tool)
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
		if code, b := do(t, "POST", s.url+"/api/v1/chats/"+id+"/tool-results", s.token, body); code != 200 {
			t.Fatalf("tool-results: %d %s", code, b)
		}
		p.waitFor(p.stderr, "the chat moved on: another client answered\n")
		p.waitFor(p.stderr, `tool get_weather: {"temp_c":5}`+"\n")
		p.waitFor(p.stdout, `tool get_weather returned {"temp_c":5}`+"\n")
		p.waitAfter(p.stderr, "the chat moved on", "\n> ")
		p.send("thanks")
		p.waitFor(p.stdout, "echo: thanks\n")
		if code := p.wait(); code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, p.stderr)
		}
		if got, want := p.stdout.String(), "tool get_weather returned {\"temp_c\":5}\necho: thanks\n"; got != want {
			t.Errorf("stdout %q, want %q", got, want)
		}
	})

	t.Run("another client decides", func(t *testing.T) {
		t.Parallel()
		p := startChat(t, dir, nil, "--url", s.url, "--token", s.token, "--approve", "current_time")
		p.send(`/call current_time {}`)
		id := p.waitChatID()
		p.waitFor(p.stderr, "(decide by ")
		p.waitFor(p.stderr, "approve? [y/n/e(dit)] ")
		ra := s.pendingAction(t, id)
		body := fmt.Sprintf(`{"decisions":[{"tool_call_id":%q,"approve":false,"reason":"not now"}]}`, ra.ToolCalls[0].ToolCallID)
		if code, b := do(t, "POST", s.url+"/api/v1/chats/"+id+"/approvals", s.token, body); code != 200 {
			t.Fatalf("approvals: %d %s", code, b)
		}
		p.waitFor(p.stderr, "the chat moved on: another client decided")
		p.waitFor(p.stdout, "tool current_time failed: denied: not now\n")
		p.send("ok")
		p.waitFor(p.stdout, "echo: ok\n")
		if code := p.wait(); code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, p.stderr)
		}
	})

	t.Run("the deadline passes", func(t *testing.T) {
		t.Parallel()
		p := startChat(t, dir, nil, "--url", s.url, "--token", s.token, "--tool", tool, "--tool-timeout", "1s")
		p.send(`/call get_weather {"city":"Oslo"}`)
		p.waitFor(p.stderr, `tool call get_weather {"city":"Oslo"}`)
		p.waitFor(p.stderr, "the chat moved on: the deadline passed\n")
		p.waitFor(p.stdout, "tool get_weather failed: no result before deadline\n")
		p.send("too late")
		p.waitFor(p.stdout, "echo: too late\n")
		if code := p.wait(); code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", code, p.stderr)
		}
		if got, want := p.stdout.String(), "tool get_weather failed: no result before deadline\necho: too late\n"; got != want {
			t.Errorf("stdout %q, want %q", got, want)
		}
		if strings.Contains(p.stderr.String(), "before deadline") {
			t.Errorf("stderr repeats the deadline's result after saying the deadline passed:\n%s", p.stderr)
		}
	})
}

// TestChatSessionHints: an interactive session says how to end it; the
// server-side tool calls show on stderr as their results arrive; nothing
// of a terminal status line reaches output that is not a terminal; the
// command printed at the end continues the chat with the flags that
// reached the server, and never shows the token.
func TestChatSessionHints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, nil)

	p := startChat(t, dir, nil, "--url", s.url, "--token", s.token)
	p.waitFor(p.stderr, `"/exit" or Ctrl-D ends the session`)
	p.send(`/call current_time {"timezone": "UTC"}`)
	p.waitFor(p.stderr, `tool current_time: {"time":"`)
	p.waitFor(p.stdout, `tool current_time returned {"time":"`)
	p.send("/exit")
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.stderr)
	}
	m := chatIDLine.FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no chat id in stderr:\n%s", p.stderr)
	}
	if want := "continue it with: parley chat --chat " + m[1] + " --url " + s.url + " --token …\n"; !strings.HasSuffix(p.stderr.String(), want) {
		t.Errorf("stderr does not end with %q:\n%s", want, p.stderr)
	}
	for _, out := range []string{p.stdout.String(), p.stderr.String()} {
		if strings.Contains(out, s.token) || strings.ContainsAny(out, "\r\033") || strings.Contains(out, "⠋") {
			t.Errorf("output holds the token or a terminal status line: %q", out)
		}
	}

	// The token read from a --data-dir elsewhere, the server named without
	// a scheme: both are in the command that continues.
	dataDir := filepath.Join(dir, "parley-data")
	addr := strings.TrimPrefix(s.url, "http://")
	r := runParley(t, t.TempDir(), nil, "chat", "--data-dir", dataDir, "--url", addr, "hi")
	m = chatIDLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || r.stdout != "echo: hi\n" || m == nil {
		t.Fatalf("chat --data-dir: exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if want := "continue it with: parley chat --chat " + m[1] + " --url " + s.url + " --data-dir " + chatcli.ShellQuote(dataDir) + "\n"; !strings.HasSuffix(r.stderr, want) {
		t.Errorf("stderr does not end with %q:\n%s", want, r.stderr)
	}

	// Settings from the environment stay there.
	r = runParley(t, dir, []string{"PARLEY_URL=" + s.url, "PARLEY_TOKEN=" + s.token}, "chat", "hi")
	m = chatIDLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil || !strings.HasSuffix(r.stderr, "continue it with: parley chat --chat "+m[1]+"\n") || strings.Contains(r.stderr, s.token) {
		t.Errorf("chat with PARLEY_URL and PARLEY_TOKEN: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestChatServerAddress: --url (or PARLEY_URL) without a scheme is http://;
// a scheme that is not HTTP says what to write; a refused connection asks
// whether "parley serve" runs at the address, naming it.
func TestChatServerAddress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, nil)
	addr := strings.TrimPrefix(s.url, "http://")

	r := runParley(t, dir, nil, "chat", "--url", addr, "--token", s.token, "hello")
	if r.code != 0 || r.stdout != "echo: hello\n" {
		t.Fatalf("--url %s: exit %d, stdout %q, stderr:\n%s", addr, r.code, r.stdout, r.stderr)
	}
	r = runParley(t, dir, []string{"PARLEY_URL=" + addr + "/"}, "chat", "--token", s.token, "hello")
	if r.code != 0 || r.stdout != "echo: hello\n" {
		t.Fatalf("PARLEY_URL=%s/: exit %d, stdout %q, stderr:\n%s", addr, r.code, r.stdout, r.stderr)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens there now: connections are refused
	for _, args := range [][]string{
		{"chat", "--url", closed, "--token", "t", "hi"},
		{"chat", "--url", "http://" + closed, "--token", "t", "--chat", "01a22723-d973-75eb-b20b-b382b9defe5f"},
	} {
		r = runParley(t, dir, nil, args...)
		want := `nothing answers at http://` + closed + ` (connection refused): is "parley serve" running at that address?`
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want it to say %q", args, r.code, r.stdout, r.stderr, want)
		}
	}

	for _, bad := range []string{"ftp://" + addr, "http://"} {
		r = runParley(t, dir, nil, "chat", "--url", bad, "--token", "t", "hi")
		if want := fmt.Sprintf(`--url %q: want the server's address, like http://127.0.0.1:8080`, bad); r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("--url %s: exit %d, stderr %q; want %q", bad, r.code, r.stderr, want)
		}
	}
}

// TestIsTerminal: a buffer is not a terminal.
func TestIsTerminal(t *testing.T) {
	if isTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is not a terminal")
	}
}
