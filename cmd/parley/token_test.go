package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/auth"
)

// TestTokenCommands creates, lists and revokes a token next to a running
// server, and checks each step against the API.
func TestTokenCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	env := []string{"PARLEY_DATA_DIR=" + data} // the token commands read it; serve gets the flag
	s := startServe(t, dir, nil, "--data-dir", data)

	r := runParley(t, dir, env, "token", "create", "--owner", "bob", "--name", "laptop")
	if r.code != 0 {
		t.Fatalf("token create: exit %d\n%s", r.code, r.stderr)
	}
	bob := strings.TrimSuffix(r.stdout, "\n")
	if !strings.HasPrefix(bob, "prl_") || strings.ContainsAny(bob, " \n") || r.stdout != bob+"\n" {
		t.Fatalf("token create stdout should be the token alone on one line, got %q", r.stdout)
	}
	if code, body := get(t, s.URL+"/api/v1/chats", bob); code != http.StatusOK {
		t.Fatalf("GET /api/v1/chats with the new token = %d %s", code, body)
	}
	id, _, err := auth.Parse(bob)
	if err != nil {
		t.Fatal(err)
	}

	all := tableRows(t, runParley(t, dir, env, "token", "list"))
	if len(all) != 2 || all[0][1] != "admin" || all[1][0] != id || all[1][1] != "bob" || all[1][2] != "laptop" || all[1][4] != "-" {
		t.Errorf("token list rows = %v, want admin's then bob's (laptop, not revoked)", all)
	}
	if rows := tableRows(t, runParley(t, dir, env, "token", "list", "--owner", "bob")); len(rows) != 1 || rows[0][0] != id {
		t.Errorf("token list --owner bob rows = %v", rows)
	}

	r = runParley(t, dir, env, "token", "revoke", id)
	if r.code != 0 || !strings.Contains(r.stdout, "revoked token "+id) {
		t.Fatalf("token revoke: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if code, _ := get(t, s.URL+"/api/v1/chats", bob); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/chats with a revoked token = %d, want 401", code)
	}
	if rows := tableRows(t, runParley(t, dir, env, "token", "list", "--owner", "bob")); len(rows) != 1 || rows[0][4] == "-" {
		t.Errorf("token list after revoke = %v, want a revocation time", rows)
	}
	if r := runParley(t, dir, env, "token", "revoke", bob); r.code != 0 || !strings.Contains(r.stdout, "already revoked") {
		t.Errorf("revoking again (by the whole token): exit %d, stdout %q", r.code, r.stdout)
	}
	if code, _ := get(t, s.URL+"/api/v1/chats", s.Token); code != http.StatusOK {
		t.Errorf("revoking bob's token affected admin's: %d", code)
	}

	failures := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"revoke unknown id", []string{"token", "revoke", "nosuchid"}, 1, `no token with id "nosuchid"`},
		{"revoke without id", []string{"token", "revoke"}, 2, "arg"},
		{"create without owner", []string{"token", "create"}, 2, "--owner is required"},
		{"create with a bad owner", []string{"token", "create", "--owner", "Bob Smith"}, 1, "Bob Smith"},
		{"create with a capital", []string{"token", "create", "--owner", "Alice"}, 1, `--owner: owner "Alice" must match`},
	}
	for _, f := range failures {
		r := runParley(t, dir, env, f.args...)
		if r.code != f.code || !strings.Contains(r.stderr, f.want) || r.stdout != "" {
			t.Errorf("%s: exit %d (want %d), stdout %q, stderr %q (want it to mention %q)", f.name, r.code, f.code, r.stdout, r.stderr, f.want)
		}
	}
	if code := s.Stop(); code != 0 {
		t.Errorf("serve exited %d\n%s", code, s.Stderr)
	}
}

// TestMigrate: migrate prepares a fresh database, is idempotent, creates no
// owner, and takes --data-dir over PARLEY_DATA_DIR.
func TestMigrate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "flagdir")
	env := []string{"PARLEY_DATA_DIR=" + filepath.Join(dir, "envdir")}
	for range 2 {
		r := runParley(t, dir, env, "migrate", "--data-dir", data)
		if r.code != 0 {
			t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
		}
		if want := "sqlite database " + filepath.Join(data, "parley.db"); !strings.Contains(r.stdout, want) {
			t.Errorf("migrate stdout %q does not name %q", r.stdout, want)
		}
	}
	checkMode(t, data, 0o700)
	if rows := tableRows(t, runParley(t, dir, nil, "token", "list", "--data-dir", data)); len(rows) != 0 {
		t.Errorf("migrate created tokens: %v", rows)
	}
	s := startServe(t, dir, nil, "--data-dir", data)
	if s.Token == "" {
		t.Error("serve on a migrated, empty database printed no admin token")
	}
	s.Stop()
}

// tableRows runs a successful "token list" result into its rows, without
// the header.
func tableRows(t *testing.T, r result) [][]string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("token list: exit %d\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) == 0 || strings.Join(strings.Fields(lines[0]), " ") != "ID OWNER NAME CREATED REVOKED" {
		t.Fatalf("token list header: %q", r.stdout)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// TestTokenCreateLink: token create prints the web UI's sign-in link for
// the new token, built on the configured listen address or on --base-url;
// --link puts it on stdout in place of the token. A bad --base-url creates
// nothing.
func TestTokenCreateLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + filepath.Join(dir, "data"), "PARLEY_LISTEN=0.0.0.0:9123"}

	r := runParley(t, dir, env, "token", "create", "--owner", "bob")
	tok := strings.TrimSuffix(r.stdout, "\n")
	if r.code != 0 || !strings.HasPrefix(tok, "prl_") {
		t.Fatalf("token create: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	if want := "web UI: http://127.0.0.1:9123/#token=" + tok + "\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("token create's stderr %q lacks %q", r.stderr, want)
	}

	r = runParley(t, dir, env, "token", "create", "--owner", "carol", "--link")
	link := strings.TrimSuffix(r.stdout, "\n")
	prefix := "http://127.0.0.1:9123/#token="
	if r.code != 0 || !strings.HasPrefix(link, prefix) || strings.Contains(r.stderr, "web UI:") {
		t.Fatalf("token create --link: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	id, _, err := auth.Parse(strings.TrimPrefix(link, prefix))
	if err != nil {
		t.Fatalf("the link %q carries no token: %v", link, err)
	}
	if rows := tableRows(t, runParley(t, dir, env, "token", "list", "--owner", "carol")); len(rows) != 1 || rows[0][0] != id {
		t.Errorf("carol's tokens %v, want the linked one, %s", rows, id)
	}

	r = runParley(t, dir, env, "token", "create", "--owner", "dave", "--link", "--base-url", "https://parley.example.com/chat/")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "https://parley.example.com/chat/#token=prl_") {
		t.Fatalf("token create --base-url: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}

	for _, bad := range []string{"ftp://parley.example.com", "parley.example.com", "https://parley.example.com/#x"} {
		r = runParley(t, dir, env, "token", "create", "--owner", "erin", "--base-url", bad)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "--base-url") {
			t.Errorf("--base-url %s: exit %d, stdout %q, stderr %q; want exit 1 naming the flag", bad, r.code, r.stdout, r.stderr)
		}
	}
	if rows := tableRows(t, runParley(t, dir, env, "token", "list", "--owner", "erin")); len(rows) != 0 {
		t.Errorf("a refused --base-url created tokens: %v", rows)
	}
}
