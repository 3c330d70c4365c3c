// Package sqlitetest gives tests a migrated SQLite store.
package sqlitetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/parleyhq/parley/internal/store/sqlite"
	"github.com/parleyhq/parley/internal/testutil/invariant"
)

// Open opens and migrates the SQLite database parley.db in dir, closed
// when the test ends; t.TempDir() is the usual dir. A dir without one gets
// a copy of a migrated database (MigratedFile) first. When the test ends,
// every chat's history is checked (invariant.Check).
func Open(t testing.TB, dir string) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "parley.db")
	if _, err := os.Stat(path); os.IsNotExist(err) {
		MigratedFile(t, path)
	}
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil { // up to date unless dir held an older one
		t.Fatal(err)
	}
	// Runs before the close above, after whatever the test starts later
	// (engines, servers) has stopped.
	t.Cleanup(func() { invariant.Check(t, st) })
	return st
}

// template is a migrated, empty database, made once per test process:
// migrating one costs a fifth of a second under -race, copying it almost
// nothing, and a package opens hundreds.
var template struct {
	once  sync.Once
	files map[string][]byte // the database's files by suffix ("", "-wal")
	err   error
}

// MigratedFile writes at path (its directory made if need be) a SQLite
// database parley's migrations have made, with nothing in it, as Open's
// Migrate would leave it.
func MigratedFile(t testing.TB, path string) {
	t.Helper()
	template.once.Do(func() { template.files, template.err = makeTemplate() })
	if template.err != nil {
		t.Fatalf("sqlitetest: %v", template.err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	for suffix, b := range template.files {
		if err := os.WriteFile(path+suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// makeTemplate migrates a database in a directory of its own and returns
// its files' contents once the store is closed.
func makeTemplate() (map[string][]byte, error) {
	dir, err := os.MkdirTemp("", "parley-sqlitetest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "parley.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("open the template: %w", err)
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate the template: %w", err)
	}
	if err := st.Close(); err != nil {
		return nil, fmt.Errorf("close the template: %w", err)
	}
	files := map[string][]byte{}
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if os.IsNotExist(err) && suffix != "" {
			continue
		}
		if err != nil {
			return nil, err
		}
		files[suffix] = b
	}
	return files, nil
}
