package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestServePostgres runs two replicas on one PostgreSQL database: the first
// creates the admin and saves its token, the second does not, both accept
// it, and a token made by the CLI works on both. Skipped without
// PARLEY_TEST_POSTGRES.
func TestServePostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	// Its cleanup, which runs after the servers' (registered later), checks
	// every chat's history once no replica writes.
	pgtest.Store(t, dsn)
	dir := t.TempDir()
	a := startServe(t, dir, nil, "--database", dsn, "--data-dir", filepath.Join(dir, "a"))
	if !strings.HasPrefix(a.Token, "prl_") {
		t.Fatalf("first replica printed no admin token\nstdout:\n%s\nstderr:\n%s", a.Stdout, a.Stderr)
	}
	tokenFile := filepath.Join(dir, "a", "admin.token")
	checkMode(t, tokenFile, 0o600)
	if got := readTrim(t, tokenFile); got != a.Token {
		t.Errorf("admin.token = %q, want %q", got, a.Token)
	}

	b := startServe(t, dir, nil, "--database", dsn, "--data-dir", filepath.Join(dir, "b"))
	if b.Token != "" {
		t.Error("the second replica created another admin token")
	}
	// With no admin.token of its own, it says how to make a token.
	if want := "sign in: open " + b.URL + " and paste an API token; parley token create --owner admin --link --data-dir " +
		filepath.Join(dir, "b") + " --database … makes one and prints a sign-in link\n"; !strings.HasPrefix(b.Stdout.String(), want) {
		t.Errorf("the second replica's stdout:\n%s\nwant it to start with:\n%s", b.Stdout, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "b", "admin.token")); !os.IsNotExist(err) {
		t.Errorf("the second replica wrote an admin.token (stat: %v)", err)
	}

	r := runParley(t, dir, []string{"PARLEY_DATABASE_URL=" + dsn}, "token", "create", "--owner", "carol")
	if r.code != 0 {
		t.Fatalf("token create: exit %d\n%s", r.code, r.stderr)
	}
	carol := strings.TrimSpace(r.stdout)
	for _, s := range []*server{a, b} {
		for _, tok := range []string{a.Token, carol} {
			if code, body := get(t, s.URL+"/api/v1/chats", tok); code != http.StatusOK {
				t.Errorf("GET %s/api/v1/chats = %d %s", s.URL, code, body)
			}
		}
		if code, body := get(t, s.URL+"/readyz", ""); code != http.StatusOK {
			t.Errorf("GET %s/readyz = %d %s", s.URL, code, body)
		}
	}
	for _, s := range []*server{a, b} {
		if code := s.Stop(); code != 0 {
			t.Errorf("replica exited %d\nstderr:\n%s", code, s.Stderr)
		}
	}
}
