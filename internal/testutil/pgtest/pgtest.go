// Package pgtest gives tests an empty PostgreSQL schema of their own, and a
// migrated store (with a pubsub, for a replica) on it. It is meant for _test
// files only.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/internal/testutil/notice"
)

// EnvVar names the environment variable that holds the DSN of the test
// database; without it, PostgreSQL tests are skipped (and fail under CI).
const EnvVar = "PARLEY_TEST_POSTGRES"

// DSN creates a fresh, empty schema t_<random> in the database of
// $PARLEY_TEST_POSTGRES and returns a DSN whose connections all use it
// (search_path). The schema is dropped when the test ends; close
// everything connected to it in a cleanup registered after DSN returns.
//
// Without PARLEY_TEST_POSTGRES the test is skipped with a notice, unless
// CI=true, where it fails: CI must run the PostgreSQL tests.
func DSN(t testing.TB) string {
	t.Helper()
	base := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvVar, err)
	}
	defer conn.Close(ctx)

	schema := "t_" + randomHex(8)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() { dropSchema(t, base, schema) })

	dsn, err := withSearchPath(base, schema)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// Require returns $PARLEY_TEST_POSTGRES. Without it, it skips the test
// with a notice on the terminal (once per package), or fails it if CI=true:
// CI must run the PostgreSQL tests.
// A test that calls DSN in many subtests calls Require first, to skip once.
func Require(t testing.TB) string {
	t.Helper()
	return notice.Env(t, EnvVar, packageOf(t)+" skips its PostgreSQL tests (the README says how to run them)")
}

// dropSchema removes a test's schema with everything in it.
func dropSchema(t testing.TB, base, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}

// withSearchPath returns dsn (a URL or key=value string) with the
// search_path run-time parameter set to schema, and the connections'
// application_name too, so that a test can find them (TerminateBackends). It also turns off
// synchronous_commit: a test database need not survive a crash, and not
// waiting for each commit's flush makes the tests several times faster.
func withSearchPath(dsn, schema string) (string, error) {
	params := [][2]string{{"search_path", schema}, {"synchronous_commit", "off"}, {"application_name", schema}}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvVar, err)
		}
		q := u.Query()
		for _, p := range params {
			q.Set(p[0], p[1])
		}
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	for _, p := range params {
		dsn += " " + p[0] + "=" + p[1]
	}
	return dsn, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TerminateBackends ends every server connection of the test's schema (DSN
// names them after it), as a database restart or a network cut would, and
// returns how many it ended. Other tests' connections are left alone.
func TerminateBackends(t testing.TB, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := cfg.RuntimeParams["application_name"]
	if name == "" {
		t.Fatal("pgtest: TerminateBackends needs a DSN from DSN")
	}
	conn, err := pgx.Connect(ctx, Require(t))
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()) t`, name).Scan(&n)
	if err != nil {
		t.Fatalf("pgtest: terminate backends: %v", err)
	}
	return n
}

// packageOf names the package under test by its path in the module (tests
// run in their package's directory), for a notice.
func packageOf(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		return "this package"
	}
	for root := dir; filepath.Dir(root) != root; root = filepath.Dir(root) {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			if rel, err := filepath.Rel(root, dir); err == nil {
				return "./" + filepath.ToSlash(rel)
			}
		}
	}
	return filepath.Base(dir)
}
