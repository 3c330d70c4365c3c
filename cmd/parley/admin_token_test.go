package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestAdminTokenOfAnotherDatabase: a start that would create an admin does
// not replace an admin.token that belongs to another database, or to one
// it cannot tell (no record of it): it exits 1 before creating the admin,
// saying where the file is from and what to do. The token of the same
// database file, emptied, is replaced; another data directory works.
func TestAdminTokenOfAnotherDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startServe(t, dir, nil)
	if code := first.Stop(); code != 0 || first.Token == "" {
		t.Fatalf("quickstart: exit %d, token %q\nstderr:\n%s", code, first.Token, first.Stderr)
	}
	tokenFile := filepath.Join(dir, "parley-data", "admin.token")
	record := filepath.Join(dir, "parley-data", "admin.token.database")
	checkMode(t, record, 0o600)
	quickstartDB := "sqlite://" + filepath.Join(dir, "parley-data", "parley.db")
	if got := readTrim(t, record); !strings.Contains(got, "database "+quickstartDB+"\n") {
		t.Errorf("admin.token.database does not name %s:\n%s", quickstartDB, got)
	}

	refused := func(t *testing.T, want ...string) {
		t.Helper()
		r := runParley(t, dir, nil, "serve", "--listen", "127.0.0.1:0", "--database", "sqlite://other.db")
		if r.code != 1 {
			t.Errorf("exit %d, want 1\nstderr:\n%s", r.code, r.stderr)
		}
		last := lastLine(r.stderr)
		for _, w := range append(want, "parley: parley-data/admin.token holds the admin token of", "sqlite://"+filepath.Join(dir, "other.db"), "--data-dir") {
			if !strings.Contains(last, w) {
				t.Errorf("the reason should mention %q, got:\n%s", w, r.stderr)
			}
		}
		if strings.Contains(r.stdout, "admin token") {
			t.Errorf("a refused start printed an admin token:\n%s", r.stdout)
		}
		if got := readTrim(t, tokenFile); got != first.Token {
			t.Errorf("admin.token was replaced with %q", got)
		}
	}
	t.Run("another database", func(t *testing.T) { refused(t, "another database, "+quickstartDB) })
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	t.Run("no record", func(t *testing.T) { refused(t, "cannot tell") })

	// Its own data directory: the admin of other.db is created there.
	other := startServe(t, dir, nil, "--database", "sqlite://other.db", "--data-dir", "other-data")
	if other.Token == "" || readTrim(t, filepath.Join(dir, "other-data", "admin.token")) != other.Token {
		t.Errorf("with its own data dir, no admin token saved\nstdout:\n%s", other.Stdout)
	}
	if code := other.Stop(); code != 0 {
		t.Errorf("exit %d\nstderr:\n%s", code, other.Stderr)
	}
}

// TestAdminTokenOfTheSameDatabaseFile: a quickstart whose database file was
// deleted starts again with a new admin, whose token replaces the old one:
// the file belonged to that database file.
func TestAdminTokenOfTheSameDatabaseFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startServe(t, dir, nil)
	if code := first.Stop(); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, first.Stderr)
	}
	for _, f := range []string{"parley.db", "parley.db-wal", "parley.db-shm"} {
		if err := os.Remove(filepath.Join(dir, "parley-data", f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	again := startServe(t, dir, nil)
	if again.Token == "" || again.Token == first.Token {
		t.Fatalf("restart on a new database file: token %q\nstderr:\n%s", again.Token, again.Stderr)
	}
	if got := readTrim(t, filepath.Join(dir, "parley-data", "admin.token")); got != again.Token {
		t.Errorf("admin.token = %q, want the new token", got)
	}
	if code := again.Stop(); code != 0 {
		t.Errorf("exit %d\nstderr:\n%s", code, again.Stderr)
	}
}

// TestAdminTokenSQLiteThenPostgres: a replica started on PostgreSQL in the
// directory of a SQLite quickstart refuses to replace the quickstart's
// parley-data/admin.token, and starts with a data directory of its own.
// Skipped without PARLEY_TEST_POSTGRES.
func TestAdminTokenSQLiteThenPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	quick := startServe(t, dir, nil)
	if code := quick.Stop(); code != 0 || quick.Token == "" {
		t.Fatalf("quickstart: exit %d, token %q\nstderr:\n%s", code, quick.Token, quick.Stderr)
	}
	tokenFile := filepath.Join(dir, "parley-data", "admin.token")

	replica := launchServe(t, dir, []string{"PARLEY_DATABASE_URL=" + dsn})
	if code := replica.Wait(); code != 1 {
		t.Errorf("the replica exited %d, want 1\nstderr:\n%s", code, replica.Stderr)
	}
	last := lastLine(replica.Stderr.String())
	for _, w := range []string{"parley-data/admin.token", "another database, sqlite://" + filepath.Join(dir, "parley-data", "parley.db"), "postgres://", "--data-dir"} {
		if !strings.Contains(last, w) {
			t.Errorf("the reason should mention %q, got:\n%s", w, replica.Stderr)
		}
	}
	if got := readTrim(t, tokenFile); got != quick.Token {
		t.Errorf("the replica replaced the quickstart's admin.token with %q", got)
	}

	own := startServe(t, dir, []string{"PARLEY_DATABASE_URL=" + dsn}, "--data-dir", "replica-data")
	if !strings.HasPrefix(own.Token, "prl_") || readTrim(t, filepath.Join(dir, "replica-data", "admin.token")) != own.Token {
		t.Errorf("with its own data dir, the replica saved no admin token\nstdout:\n%s\nstderr:\n%s", own.Stdout, own.Stderr)
	}
	if !strings.Contains(readTrim(t, filepath.Join(dir, "replica-data", "admin.token.database")), "database postgres://") {
		t.Error("admin.token.database does not name the PostgreSQL database")
	}
	if got := readTrim(t, tokenFile); got != quick.Token {
		t.Errorf("the quickstart's admin.token changed to %q", got)
	}
	if code := own.Stop(); code != 0 {
		t.Errorf("exit %d\nstderr:\n%s", code, own.Stderr)
	}
}
