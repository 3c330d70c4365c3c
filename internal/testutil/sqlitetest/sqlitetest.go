// Package sqlitetest gives tests a migrated SQLite store.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/internal/store/sqlite"
	"github.com/parleyhq/parley/internal/testutil/invariant"
)

// Open opens (creating it) and migrates the SQLite database parley.db in
// dir, closed when the test ends; t.TempDir() is the usual dir. When the
// test ends, every chat's history is checked (invariant.Check).
func Open(t testing.TB, dir string) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "parley.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Runs before the close above, after whatever the test starts later
	// (engines, servers) has stopped.
	t.Cleanup(func() { invariant.Check(t, st) })
	return st
}
