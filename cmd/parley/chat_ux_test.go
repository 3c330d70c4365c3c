package main

import (
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chatcli"
)

// TestChatSessionHints: an interactive session says how to end it; the
// server-side tool calls show on stderr as their results arrive; nothing
// of a terminal status line reaches output that is not a terminal; the
// command printed at the end continues the chat with the flags that
// reached the server, and never shows the token.
func TestChatSessionHints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, nil)

	p := startChat(t, dir, nil, "--url", s.URL, "--token", s.Token)
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
	if want := "continue it with: parley chat --chat " + m[1] + " --url " + s.URL + " --token …\n"; !strings.HasSuffix(p.stderr.String(), want) {
		t.Errorf("stderr does not end with %q:\n%s", want, p.stderr)
	}
	for _, out := range []string{p.stdout.String(), p.stderr.String()} {
		if strings.Contains(out, s.Token) || strings.ContainsAny(out, "\r\033") || strings.Contains(out, "⠋") {
			t.Errorf("output holds the token or a terminal status line: %q", out)
		}
	}

	// The token read from a --data-dir elsewhere, the server named without
	// a scheme: both are in the command that continues.
	dataDir := filepath.Join(dir, "parley-data")
	addr := strings.TrimPrefix(s.URL, "http://")
	r := runParley(t, t.TempDir(), nil, "chat", "--data-dir", dataDir, "--url", addr, "hi")
	m = chatIDLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || r.stdout != "echo: hi\n" || m == nil {
		t.Fatalf("chat --data-dir: exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if want := "continue it with: parley chat --chat " + m[1] + " --url " + s.URL + " --data-dir " + chatcli.ShellQuote(dataDir) + "\n"; !strings.HasSuffix(r.stderr, want) {
		t.Errorf("stderr does not end with %q:\n%s", want, r.stderr)
	}

	// Settings from the environment stay there.
	r = runParley(t, dir, []string{"PARLEY_URL=" + s.URL, "PARLEY_TOKEN=" + s.Token}, "chat", "hi")
	m = chatIDLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil || !strings.HasSuffix(r.stderr, "continue it with: parley chat --chat "+m[1]+"\n") || strings.Contains(r.stderr, s.Token) {
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
	addr := strings.TrimPrefix(s.URL, "http://")

	r := runParley(t, dir, nil, "chat", "--url", addr, "--token", s.Token, "hello")
	if r.code != 0 || r.stdout != "echo: hello\n" {
		t.Fatalf("--url %s: exit %d, stdout %q, stderr:\n%s", addr, r.code, r.stdout, r.stderr)
	}
	r = runParley(t, dir, []string{"PARLEY_URL=" + addr + "/"}, "chat", "--token", s.Token, "hello")
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
