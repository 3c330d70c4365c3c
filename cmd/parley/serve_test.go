package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeSQLite walks the embedded default from first start to restart:
// the admin token printed once and saved 0600 with the web UI's sign-in
// link, health and an authenticated request, a second server refused, a
// graceful SIGTERM with an event stream open, and a restart that creates no
// second admin token, prints no link and says where the token is.
func TestServeSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, nil) // no --data-dir: ./parley-data of dir, like the README

	if !strings.HasPrefix(s.Token, "prl_") {
		t.Fatalf("no admin token printed\nstdout:\n%s", s.Stdout)
	}
	// Once on its line and once in the link that follows it.
	link := "web UI: " + s.URL + "/#token=" + s.Token + "\n"
	if n := strings.Count(s.Stdout.String(), s.Token); n != 2 {
		t.Errorf("the admin token appears %d times on stdout, want twice (its line and the link)", n)
	}
	if _, after, ok := strings.Cut(s.Stdout.String(), "admin token: "+s.Token+"\n"); !ok ||
		!strings.HasPrefix(after, "  (created owner") || !strings.Contains(after, "\n"+link+"parley listening on "+s.URL+"\n") {
		t.Errorf("stdout should be the admin token's lines, then %q, then the address:\n%s", link, s.Stdout)
	}
	if code, page := get(t, s.URL+"/", ""); code != http.StatusOK || !strings.Contains(page, "<html") {
		t.Errorf("GET / (the web UI) = %d %.100s", code, page)
	}
	dataDir := filepath.Join(dir, "parley-data")
	checkMode(t, dataDir, 0o700)
	tokenFile := filepath.Join(dataDir, "admin.token")
	checkMode(t, tokenFile, 0o600)
	if got := readTrim(t, tokenFile); got != s.Token {
		t.Errorf("admin.token holds %q, want the printed token %q", got, s.Token)
	}

	if code, body := get(t, s.URL+"/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz = %d %s", code, body)
	}
	if code, body := get(t, s.URL+"/api/v1/chats", s.Token); code != http.StatusOK {
		t.Errorf("GET /api/v1/chats with the admin token = %d %s", code, body)
	}
	if code, _ := get(t, s.URL+"/api/v1/chats", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/chats without a token = %d, want 401", code)
	}
	if code, body := get(t, s.URL+"/readyz", ""); code != http.StatusOK {
		t.Errorf("GET /readyz = %d %s", code, body)
	}
	code, metrics := get(t, s.URL+"/metrics", "")
	for _, m := range []string{"parley_http_requests_total", "go_goroutines", "process_open_fds"} {
		if code != http.StatusOK || !strings.Contains(metrics, m) {
			t.Errorf("GET /metrics = %d, without %s", code, m)
		}
	}

	// A second server on the same SQLite file is refused, plainly.
	second := launchServe(t, dir, nil)
	if code := second.Wait(); code == 0 {
		t.Fatal("a second serve on the same SQLite database exited 0")
	}
	stderr := second.Stderr.String()
	if !strings.HasPrefix(stderr, "parley: another parley process is already serving") ||
		!strings.Contains(stderr, "PostgreSQL") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("second serve's stderr should be one line saying why and what to do, got:\n%s", stderr)
	}
	if out := second.Stdout.String(); out != "" {
		t.Errorf("second serve printed on stdout: %q", out)
	}

	// SIGTERM with an owner feed open: the stream ends and serve exits 0.
	stream := openStream(t, s.URL+"/api/v1/chats/watch", s.Token)
	if code := s.Stop(); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM, want 0\nstderr:\n%s", code, s.Stderr)
	}
	waitClosed(t, stream)

	// A restart finds the admin and creates no second token.
	again := startServe(t, dir, nil)
	if again.Token != "" || strings.Contains(again.Stdout.String(), "admin token:") || strings.Contains(again.Stdout.String(), "web UI:") {
		t.Errorf("restart printed an admin token or its link again:\n%s", again.Stdout)
	}
	// It says where the token is and how to sign in, without the token.
	if want := "sign in: open " + again.URL + " and paste the admin token from parley-data/admin.token\nparley listening on " + again.URL + "\n"; again.Stdout.String() != want || strings.Contains(again.Stdout.String(), s.Token) {
		t.Errorf("restart's stdout:\n%s\nwant:\n%s", again.Stdout, want)
	}
	if got := readTrim(t, tokenFile); got != s.Token {
		t.Errorf("restart changed admin.token to %q", got)
	}
	if code, body := get(t, again.URL+"/api/v1/chats", s.Token); code != http.StatusOK {
		t.Errorf("the first admin token after restart: GET /api/v1/chats = %d %s", code, body)
	}
	if code := again.Stop(); code != 0 {
		t.Errorf("restarted serve exited %d after SIGTERM\nstderr:\n%s", code, again.Stderr)
	}
}

// TestServeConfigErrors: settings that do not parse stop serve before it
// touches anything, with a plain message and a non-zero status.
func TestServeConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("listen: 127.0.0.1:0\nmodels:\n  - {name: a, provider: gemini, model: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"missing config file", nil, []string{"serve", "--config", "nope.yaml"}, 1, "nope.yaml"},
		{"bad config file", nil, []string{"serve", "--config", bad}, 1, `provider "gemini"`},
		{"config file from env", []string{"PARLEY_CONFIG=" + bad}, []string{"serve"}, 1, `provider "gemini"`},
		{"bad database URL", nil, []string{"serve", "--database", "mysql://h/db"}, 1, "mysql://h/db"},
		{"bad log level", []string{"PARLEY_LOG_LEVEL=loud"}, []string{"serve"}, 1, "log_level"},
		{"unknown flag", nil, []string{"serve", "--nope"}, 2, "--nope"},
		{"extra argument", nil, []string{"serve", "now"}, 2, "now"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runParley(t, dir, c.env, c.args...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d\nstderr:\n%s", r.code, c.code, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "parley: ") || !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr should start with \"parley: \" and mention %q, got:\n%s", c.want, r.stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "parley-data")); !os.IsNotExist(err) {
		t.Errorf("a failed start created the data dir (stat: %v)", err)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, c := range [][]string{{"serve"}, {"migrate"}, {"token"}, {"token", "create"}, {"token", "list"}, {"token", "revoke"}} {
		r := runParley(t, t.TempDir(), nil, append(c, "--help")...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("parley %s --help: exit %d\n%s%s", strings.Join(c, " "), r.code, r.stdout, r.stderr)
		}
		if c[len(c)-1] != "token" && !strings.Contains(r.stdout, "Examples:") {
			t.Errorf("parley %s --help has no examples", strings.Join(c, " "))
		}
		if !strings.Contains(r.stdout, "--database") {
			t.Errorf("parley %s --help does not list the global --database flag", strings.Join(c, " "))
		}
	}
}

// openStream opens an event stream and returns its body once the server
// has answered 200.
func openStream(t *testing.T, url, token string) io.ReadCloser {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 2 * deadline}).Do(req) // the timeout only guards against a hang
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp.Body
}

// waitClosed reads a stream to its end, failing if it stays open past the
// deadline.
func waitClosed(t *testing.T, body io.ReadCloser) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, body)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(deadline):
		body.Close()
		<-done
		t.Error("the event stream stayed open after the server stopped")
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %o, want %o", path, got, want)
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
