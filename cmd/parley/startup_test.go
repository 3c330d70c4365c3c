package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeFailedStartLeavesNothing: a start that fails on a setting (the
// listen address taken or invalid, a Lua source that does not load, a
// model's API key unset) fails before the database is touched: exit 1, one
// line on stderr saying why, no admin token printed, and no data directory,
// database or admin.token left behind.
func TestServeFailedStartLeavesNothing(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() }) // after the parallel subtests, unlike a defer

	cases := []struct {
		name   string
		config string // a configuration file, if not ""
		env    []string
		args   []string
		want   []string // in stderr
	}{
		{"port in use", "", nil, []string{"--listen", taken.Addr().String()},
			[]string{taken.Addr().String(), "already in use", "--listen", "PARLEY_LISTEN", "listen: in the configuration file"}},
		{"port in use from env", "", []string{"PARLEY_LISTEN=" + taken.Addr().String()}, nil,
			[]string{"already in use", "PARLEY_LISTEN"}},
		{"invalid port", "", nil, []string{"--listen", "127.0.0.1:99999"},
			[]string{"127.0.0.1:99999", "--listen"}},
		{"missing Lua path", "listen: 127.0.0.1:0\ntools:\n  lua:\n    - {name: weather, path: ./no-such-tools}\n", nil, nil,
			[]string{"tools.lua", "no-such-tools"}},
		{"missing API key", "listen: 127.0.0.1:0\nmodels:\n  - {name: fast, provider: openai, model: gpt-5-mini, api_key_env: PARLEY_TEST_UNSET_KEY}\n", nil, nil,
			[]string{"fast", "PARLEY_TEST_UNSET_KEY", "not set"}},
		{"agent's dynamic tool named like a server-side tool", "listen: 127.0.0.1:0\nagents:\n  - name: fetcher\n" +
			"    dynamic_tools: [{name: http_fetch, description: mine, input_schema: {type: object}}]\n", nil, nil,
			[]string{"agents[0] (fetcher)", "dynamic_tools[0].name", `"http_fetch" is the name of a server-side tool`}},
		{"missing API key with an MCP server down", "listen: 127.0.0.1:0\n" +
			"models:\n  - {name: fast, provider: openai, model: gpt-5-mini, api_key_env: PARLEY_TEST_UNSET_KEY}\n" +
			"tools:\n  mcp:\n    - {name: down, url: 'http://127.0.0.1:1/mcp', connect_timeout: 1s}\n", nil, nil,
			[]string{"PARLEY_TEST_UNSET_KEY"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append([]string{"serve"}, c.args...)
			if c.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "parley.yaml"), []byte(c.config), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", "parley.yaml")
			}
			r := runParley(t, dir, c.env, args...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1\nstderr:\n%s", r.code, r.stderr)
			}
			last := lastLine(r.stderr)
			if !strings.HasPrefix(last, "parley: ") {
				t.Errorf("stderr should end with the reason, one line starting with \"parley: \", got:\n%s", r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(last, w) {
					t.Errorf("the reason should mention %q, got: %s", w, last)
				}
			}
			if r.stdout != "" {
				t.Errorf("a failed start printed on stdout: %q", r.stdout)
			}
			for _, p := range []string{"parley-data", "parley-data/parley.db", "parley-data/admin.token"} {
				if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
					t.Errorf("a failed start left %s behind (stat: %v)", p, err)
				}
			}
		})
	}
}

// lastLine is the last line of s, without its newline.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestServeStartsWithMCPServersDown: MCP servers that are down (a command
// that does not exist, a URL nothing listens on) do not stop the start,
// although the tools are built before the database is touched.
func TestServeStartsWithMCPServersDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	offline := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	cfg := "tools:\n  mcp:\n" +
		"    - {name: missing, command: [" + filepath.Join(dir, "no-such-mcp-server") + "], connect_timeout: 1s}\n" +
		"    - {name: offline, url: '" + offline + "', connect_timeout: 1s}\n"
	if err := os.WriteFile(filepath.Join(dir, "parley.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, nil, "--config", "parley.yaml")
	if !strings.HasPrefix(s.Token, "prl_") {
		t.Errorf("no admin token printed\nstdout:\n%s", s.Stdout)
	}
	if code := s.Stop(); code != 0 {
		t.Errorf("serve exited %d after SIGTERM\nstderr:\n%s", code, s.Stderr)
	}
}

// TestServeWildcardAddress: with a wildcard host (--listen :PORT), serve
// prints an address a person can open, on 127.0.0.1, not "[::]", and
// prints it once on stdout. With stdout not a terminal, the log has the
// listening line too, for logs kept apart from stdout.
func TestServeWildcardAddress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, nil, "--listen", ":0") // the last --listen wins
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("serve --listen :0 prints %s, want http://127.0.0.1:PORT", s.URL)
	}
	if code, body := get(t, s.URL+"/healthz", ""); code != http.StatusOK {
		t.Errorf("GET %s/healthz = %d %s", s.URL, code, body)
	}
	if n := strings.Count(s.Stdout.String(), "listening"); n != 1 {
		t.Errorf("stdout mentions listening %d times, want once:\n%s", n, s.Stdout)
	}
	if code := s.Stop(); code != 0 {
		t.Errorf("serve exited %d\nstderr:\n%s", code, s.Stderr)
	}
	if !strings.Contains(s.Stderr.String(), "level=INFO msg=listening") {
		t.Errorf("with stdout not a terminal, the log should have the listening line:\n%s", s.Stderr)
	}
}

func TestOpenableURL(t *testing.T) {
	for addr, want := range map[string]string{
		"[::]:8080":      "http://127.0.0.1:8080",
		"0.0.0.0:8080":   "http://127.0.0.1:8080",
		":8080":          "http://127.0.0.1:8080",
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		"[::1]:8080":     "http://[::1]:8080",
		"10.1.2.3:9000":  "http://10.1.2.3:9000",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := openableURL(a); got != want {
			t.Errorf("openableURL(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestExitStatus: as docs/operations.md says, a command line that does not
// parse (an unknown command or flag, a wrong number of arguments) exits 2,
// with the reason and where to find the usage; a setting with a bad value
// is a failure like any other and exits 1; help and --version exit 0.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		code int
		want []string // in stderr
	}{
		{[]string{"server"}, 2, []string{`unknown command "server" for "parley"`, "did you mean serve?", "Run 'parley --help' for usage."}},
		{[]string{"token", "revok", "x"}, 2, []string{`unknown command "revok" for "parley token"`, "did you mean revoke?", "Run 'parley token --help'"}},
		{[]string{"--nope"}, 2, []string{"--nope", "Run 'parley --help'"}},
		{[]string{"serve", "now"}, 2, []string{"now", "Run 'parley serve --help'"}},
		{[]string{"token", "revoke"}, 2, []string{"Run 'parley token revoke --help'"}},
		{[]string{"serve", "--listen", "8080"}, 1, []string{"listen", "HOST:PORT"}},
		{[]string{"migrate", "--log-level", "loud"}, 1, []string{"log_level"}},
		{nil, 0, nil},
		{[]string{"token"}, 0, nil},
		{[]string{"--version"}, 0, nil},
	} {
		r := runParley(t, t.TempDir(), nil, c.args...)
		if r.code != c.code {
			t.Errorf("parley %s: exit %d, want %d\nstderr:\n%s", strings.Join(c.args, " "), r.code, c.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("parley %s: stderr should mention %q, got:\n%s", strings.Join(c.args, " "), w, r.stderr)
			}
		}
		if c.code == 0 && r.stderr != "" {
			t.Errorf("parley %s: stderr %q", strings.Join(c.args, " "), r.stderr)
		}
	}
}

// TestVersionFlag: --version prints the module version or, for a build
// from a checkout with VCS stamping, its commit; "devel" alone when the
// build recorded neither (go build -buildvcs=false).
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	r := runParley(t, t.TempDir(), nil, "--version")
	v, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "parley version ")
	if r.code != 0 || !ok || v == "" {
		t.Errorf("parley --version: exit %d, %q", r.code, r.stdout)
	}
}
