package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The migrated schemas of this test process that no test holds: each is
// migrated and empty. Migrating a fresh schema costs the database about
// half a second, and a conformance suite runs hundreds of tests; emptying
// a schema costs a few milliseconds.
var pool struct {
	mu   sync.Mutex
	free []string
	all  []string
}

// MigratedDSN is DSN on a schema that migrate has migrated, with every
// table empty. Schemas are reused between the tests of this process: made
// and migrated when none is free, emptied (TRUNCATE) and freed when a test
// ends. The test must leave the schema's definition as it found it, and
// close everything connected to it in a cleanup registered after
// MigratedDSN returns. A package that uses it calls DropPool when its
// tests are over (TestMain).
func MigratedDSN(t testing.TB, migrate func(ctx context.Context, dsn string) error) string {
	t.Helper()
	base := Require(t)
	pool.mu.Lock()
	var schema string
	if n := len(pool.free); n > 0 {
		schema, pool.free = pool.free[n-1], pool.free[:n-1]
	}
	pool.mu.Unlock()
	if schema == "" {
		schema = "t_" + randomHex(8)
		if err := exec(base, "CREATE SCHEMA "+schema); err != nil {
			t.Fatalf("pgtest: create schema: %v", err)
		}
		pool.mu.Lock()
		pool.all = append(pool.all, schema)
		pool.mu.Unlock()
		dsn, err := withSearchPath(base, schema)
		if err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := migrate(ctx, dsn); err != nil {
			t.Fatalf("pgtest: migrate schema %s: %v", schema, err)
		}
	}
	t.Cleanup(func() { release(t, base, schema) })
	dsn, err := withSearchPath(base, schema)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// release empties a schema a test held and frees it; one that cannot be
// emptied (a connection still holds a lock on it) is dropped instead.
func release(t testing.TB, base, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Errorf("pgtest: empty schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT quote_ident(tablename) FROM pg_tables
		WHERE schemaname = $1 AND tablename <> 'goose_db_version'`, schema)
	if err != nil {
		t.Errorf("pgtest: empty schema %s: %v", schema, err)
		return
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Errorf("pgtest: empty schema %s: %v", schema, err)
		return
	}
	for i, name := range tables {
		tables[i] = schema + "." + name
	}
	// DELETE, with triggers and foreign keys off for the session, rather
	// than TRUNCATE, which makes new files for every table and index;
	// then the sequences start again.
	stmts := []string{"SET lock_timeout = '5s'", "SET session_replication_role = replica"}
	for _, table := range tables {
		stmts = append(stmts, "DELETE FROM "+table)
	}
	stmts = append(stmts, `SELECT setval(format('%I.%I', schemaname, sequencename), 1, false)
		FROM pg_sequences WHERE schemaname = '`+schema+`'`)
	_, err = conn.Exec(ctx, strings.Join(stmts, "; "))
	if err != nil {
		t.Logf("pgtest: schema %s not emptied (%v): dropped", schema, err)
		dropSchema(t, base, schema)
		forget(schema)
		return
	}
	pool.mu.Lock()
	pool.free = append(pool.free, schema)
	pool.mu.Unlock()
}

// forget takes a dropped schema out of the pool.
func forget(schema string) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for i, s := range pool.all {
		if s == schema {
			pool.all = append(pool.all[:i], pool.all[i+1:]...)
			return
		}
	}
}

// DropPool drops the schemas MigratedDSN made; call it once the package's
// tests are over.
func DropPool() error {
	base := os.Getenv(EnvVar)
	pool.mu.Lock()
	schemas := pool.all
	pool.all, pool.free = nil, nil
	pool.mu.Unlock()
	if base == "" || len(schemas) == 0 {
		return nil
	}
	return exec(base, "DROP SCHEMA "+strings.Join(schemas, ", ")+" CASCADE")
}

// exec runs one statement on a connection of its own.
func exec(dsn, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// Main runs a package's tests and then drops the schemas MigratedDSN made:
// the TestMain of a package that uses Migrated or MigratedDSN calls it.
func Main(m *testing.M) {
	code := m.Run()
	if err := DropPool(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
	}
	os.Exit(code)
}
