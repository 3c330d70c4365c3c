package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/sqlite"
	"github.com/parleyhq/parley/internal/store/storetest"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
)

// openTemp opens and migrates a store in a fresh directory (which Open
// creates) and closes it when t ends.
func openTemp(t *testing.T) *sqlite.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "parley.db")
	sqlitetest.MigratedFile(t, path) // Migrate below then only checks the version
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}

func TestMigrateTwiceIsNoOp(t *testing.T) {
	s := openTemp(t)
	inTx(t, s, func(tx store.Tx) error { _, err := tx.CreateOwner(t.Context(), "alice"); return err })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if n, err := s.CountOwners(t.Context()); err != nil || n != 1 {
		t.Fatalf("after the second Migrate: %d owners, %v", n, err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	inTx(t, s, func(tx store.Tx) error { _, err := tx.CreateOwner(t.Context(), "alice"); return err })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountOwners(t.Context()); err != nil || n != 1 {
		t.Fatalf("after reopening: %d owners, %v", n, err)
	}
}

func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "parley.db")
	release, err := sqlite.Lock(path)
	if err != nil {
		t.Fatalf("first Lock: %v", err)
	}
	_, err = sqlite.Lock(path)
	if !errors.Is(err, sqlite.ErrLocked) {
		t.Fatalf("second Lock: %v, want ErrLocked", err)
	}
	for _, want := range []string{"another parley process is already serving " + path, "PostgreSQL", "stop it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// Another database in the same directory is not affected.
	releaseOther, err := sqlite.Lock(filepath.Join(filepath.Dir(path), "other.db"))
	if err != nil {
		t.Fatalf("Lock of another database: %v", err)
	}
	defer releaseOther()

	if err := release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	release, err = sqlite.Lock(path)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	release()
}

// TestOpenWhileLocked: CLI commands open the database that a server holds
// the lock of.
func TestOpenWhileLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.db")
	release, err := sqlite.Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	server := mustOpen(t, path)
	cli := mustOpen(t, path)
	inTx(t, cli, func(tx store.Tx) error { _, err := tx.CreateOwner(t.Context(), "alice"); return err })
	if n, err := server.CountOwners(t.Context()); err != nil || n != 1 {
		t.Fatalf("the server sees %d owners, %v", n, err)
	}
}

func mustOpen(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOpenBadPath(t *testing.T) {
	// A directory cannot be created below a regular file.
	file := filepath.Join(t.TempDir(), "file")
	mustOpen(t, file) // creates it
	if _, err := sqlite.Open(context.Background(), filepath.Join(file, "sub", "parley.db")); err == nil {
		t.Fatal("Open below a regular file: no error")
	}
}

func inTx(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.InTx(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}
