package main

import (
	"github.com/parleyhq/parley/internal/testutil/parleybin"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// weatherSchema is the JSON Schema of the get_weather tool of these tests.
const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`

// chatProc is a running "parley chat" whose stdin the test writes.
type chatProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *output
	stderr *output
	exited chan struct{}
}

// startChat starts "parley chat args..." in dir.
func startChat(t *testing.T, dir string, env []string, args ...string) *chatProc {
	t.Helper()
	cmd := command(dir, env, append([]string{"chat"}, args...)...)
	p := &chatProc{t: t, cmd: cmd, stdout: parleybin.NewOutput(), stderr: parleybin.NewOutput(), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// send types a line.
func (p *chatProc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write %q to chat's stdin: %v", line, err)
	}
}

// waitFor waits until o holds s, failing if the process ends first or the
// deadline passes.
func (p *chatProc) waitFor(o *output, s string) {
	p.t.Helper()
	p.waitCount(o, s, 1)
}

// waitCount waits until o holds s n times.
func (p *chatProc) waitCount(o *output, s string, n int) {
	p.t.Helper()
	held, ended := o.Wait(func(text string) bool { return strings.Count(text, s) >= n }, p.exited, deadline)
	switch {
	case held:
	case ended:
		p.t.Fatalf("chat exited without printing %q %d times\nstdout:\n%s\nstderr:\n%s", s, n, p.stdout, p.stderr)
	default:
		p.t.Fatalf("chat did not print %q %d times\nstdout:\n%s\nstderr:\n%s", s, n, p.stdout, p.stderr)
	}
}

// wait closes stdin and waits for the exit code.
func (p *chatProc) wait() int {
	p.t.Helper()
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(deadline):
		p.t.Fatalf("chat did not exit\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// chatIDLine matches the stderr of a session on a new chat: its id at the
// start, and at the end the command that continues it.
var chatIDLine = regexp.MustCompile(`chat ([0-9a-f-]{36})\n(?s:.*)continue it with: parley chat --chat ([0-9a-f-]{36})`)

// TestChatCommand: one message, one answer on stdout; the token read from
// the data dir; a continued chat; and the errors a user meets.
func TestChatCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, nil) // ./parley-data of dir, where chat finds admin.token

	r := runParley(t, dir, []string{"PARLEY_URL=" + s.URL}, "chat", "hello there")
	if r.code != 0 || r.stdout != "echo: hello there\n" {
		t.Fatalf("chat: exit %d, stdout %q, want the echo; stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	m := chatIDLine.FindStringSubmatch(r.stderr)
	if m == nil || m[1] != m[2] {
		t.Fatalf("stderr does not name the chat:\n%s", r.stderr)
	}

	other := t.TempDir() // no admin.token here: the token comes from the flag
	r = runParley(t, other, nil, "chat", "--url", s.URL, "--token", s.Token, "--chat", m[1], "and again")
	if r.code != 0 || r.stdout != "echo: and again\n" {
		t.Fatalf("chat --chat: exit %d, stdout %q; stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	code, body := get(t, s.URL+"/api/v1/chats/"+m[1]+"/messages", s.Token)
	if code != 200 || strings.Count(body, `"role":"user"`) != 2 || strings.Count(body, `"role":"assistant"`) != 2 {
		t.Errorf("the continued chat's messages: %d %s", code, body)
	}

	schema := filepath.Join(other, "weather.json")
	if err := os.WriteFile(schema, []byte(weatherSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	failures := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no token", []string{"chat", "--url", s.URL, "hi"}, 1, "no token"},
		{"bad token", []string{"chat", "--url", s.URL, "--token", "prl_nope", "hi"}, 1, "401 unauthorized"},
		{"unknown chat", []string{"chat", "--url", s.URL, "--token", s.Token, "--chat", "01a22723-d973-75eb-b20b-b382b9defe5f", "hi"}, 1, "404 not_found"},
		{"tool with chat", []string{"chat", "--token", "t", "--chat", "x", "--tool", "a=" + schema, "hi"}, 2, "--tool"},
		{"tool without file", []string{"chat", "--token", "t", "--tool", "get_weather", "hi"}, 2, "NAME=FILE"},
		{"approve with chat", []string{"chat", "--token", "t", "--chat", "x", "--approve", "a_*", "hi"}, 2, "--approve"},
		{"tool file missing", []string{"chat", "--token", "t", "--tool", "get_weather=nope.json", "hi"}, 1, "nope.json"},
		{"tool schema refused", []string{"chat", "--url", s.URL, "--token", s.Token, "--tool", "bad name=" + schema, "hi"}, 1, "dynamic_tools[0].name"},
	}
	for _, f := range failures {
		r := runParley(t, other, nil, f.args...)
		if r.code != f.code || !strings.Contains(r.stderr, f.want) || r.stdout != "" {
			t.Errorf("%s: exit %d (want %d), stdout %q, stderr %q (want it to mention %q)", f.name, r.code, f.code, r.stdout, r.stderr, f.want)
		}
	}
}

// TestChatServerToolSelection: --tools narrows a new chat's server-side
// tools to its globs (comma-separated or repeated), warns of a glob that
// matches none of them, and is refused when malformed or with --chat;
// --tools ” selects none.
func TestChatServerToolSelection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, nil)
	env := []string{"PARLEY_URL=" + s.URL, "PARLEY_TOKEN=" + s.Token}

	r := runParley(t, dir, env, "chat", "--tools", "current_*,x_*", "--tools", "http_fetch", "hello")
	if r.code != 0 || r.stdout != "echo: hello\n" {
		t.Fatalf("chat --tools: exit %d, stdout %q; stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, `warning: tools[1] "x_*" matches no server-side tool now`) || strings.Count(r.stderr, "warning:") != 1 {
		t.Errorf("stderr does not warn of x_* alone:\n%s", r.stderr)
	}
	m := chatIDLine.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no chat id in stderr:\n%s", r.stderr)
	}
	if code, body := get(t, s.URL+"/api/v1/chats/"+m[1], s.Token); code != 200 || !strings.Contains(body, `"tools":["current_*","x_*","http_fetch"]`) {
		t.Errorf("chat: %d %s", code, body)
	}

	r = runParley(t, dir, env, "chat", "--tools", "", "hello")
	m = chatIDLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil || strings.Contains(r.stderr, "warning:") {
		t.Fatalf("chat --tools '': exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if code, body := get(t, s.URL+"/api/v1/chats/"+m[1], s.Token); code != 200 || !strings.Contains(body, `"tools":[]`) {
		t.Errorf("chat with --tools '': %d %s", code, body)
	}

	r = runParley(t, dir, env, "chat", "hello")
	m = chatIDLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("chat: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if code, body := get(t, s.URL+"/api/v1/chats/"+m[1], s.Token); code != 200 || !strings.Contains(body, `"tools":null`) {
		t.Errorf("chat without --tools: %d %s", code, body)
	}

	for _, f := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"malformed glob", []string{"chat", "--tools", "ok_*,bad[", "hi"}, 1, "tools[1]"},
		{"with chat", []string{"chat", "--chat", m[1], "--tools", "a_*", "hi"}, 2, "--tools"},
	} {
		r := runParley(t, dir, env, f.args...)
		if r.code != f.code || !strings.Contains(r.stderr, f.want) || r.stdout != "" {
			t.Errorf("%s: exit %d (want %d), stdout %q, stderr %q (want it to mention %q)", f.name, r.code, f.code, r.stdout, r.stderr, f.want)
		}
	}
}
