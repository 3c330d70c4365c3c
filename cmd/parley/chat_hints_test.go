package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatUnauthorizedHint: a token the server refuses is named by where it
// came from (the admin.token file's path, or the flag or variable), never by
// its value, with how to give another.
func TestChatUnauthorizedHint(t *testing.T) {
	t.Parallel()
	s := startServe(t, t.TempDir(), nil)

	stale := t.TempDir() // an older server's data dir, in the current directory
	tokenFile := filepath.Join(stale, "parley-data", "admin.token")
	if err := os.MkdirAll(filepath.Dir(tokenFile), 0o700); err != nil {
		t.Fatal(err)
	}
	const staleToken = "prl_stale0000000000000000000000000000000000000000"
	if err := os.WriteFile(tokenFile, []byte(staleToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		dir    string
		env    []string
		args   []string
		secret string
		want   string
	}{
		{"admin.token file", stale, nil, []string{"chat", "--url", s.URL, "hi"}, staleToken,
			"the server refused the token read from " + tokenFile + ": pass another with --token (or PARLEY_TOKEN), or point --data-dir at the data dir of the server you talk to"},
		{"flag", stale, nil, []string{"chat", "--url", s.URL, "--token", "prl_flag000", "hi"}, "prl_flag000",
			"the server refused the token of --token: "},
		{"variable", stale, []string{"PARLEY_TOKEN=prl_env000"}, []string{"chat", "--url", s.URL, "hi"}, "prl_env000",
			"the server refused the token of PARLEY_TOKEN: "},
	}
	for _, c := range cases {
		r := runParley(t, c.dir, c.env, c.args...)
		if r.code != 1 || !strings.Contains(r.stderr, "401") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q, want it to say %q", c.name, r.code, r.stderr, c.want)
		}
		if strings.Contains(r.stderr, c.secret) {
			t.Errorf("%s: stderr shows the token: %q", c.name, r.stderr)
		}
	}
}

// TestProgName: the command a hint suggests is how parley was started.
func TestProgName(t *testing.T) {
	for arg0, want := range map[string]string{
		"/tmp/go-build2381234567/b001/exe/parley": "go run ./cmd/parley",
		"/var/tmp/go-build99/b001/exe/parley":     "go run ./cmd/parley",
		// go run's executable kept in the build cache, run from the second time on
		"/root/.cache/go-build/37/37bedd1a98b607f04afd703d80340de6bd3f0c3cbca766758afee96d9c8fa668-d/parley":    "go run ./cmd/parley",
		"/home/me/.cache/go-build/37/47bedd1a98b607f04afd703d80340de6bd3f0c3cbca766758afee96d9c8fa668-d/parley": "parley",
		"/home/me/37/37bedd1a98b607f04afd703d80340de6bd3f0c3cbca766758afee96d9c8fa668/parley":                   "parley",
		"/usr/local/bin/parley": "parley",
		"parley":                "parley",
		"./parley":              "parley",
		"/home/me/exe/parley":   "parley",
	} {
		if got := progName(arg0); got != want {
			t.Errorf("progName(%q) = %q, want %q", arg0, got, want)
		}
	}
}
