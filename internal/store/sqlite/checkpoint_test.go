package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/store"
)

// TestWALIsCheckpointedOffTheWriter: the writer never checkpoints (no stall
// behind it), yet the log is copied back into the database file, so the
// file holds the data and the log is reused instead of growing.
func TestWALIsCheckpointedOffTheWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var auto int
	if err := s.write.QueryRow("PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("writer wal_autocheckpoint = %d, %v; want 0", auto, err)
	}
	before, _ := os.Stat(path)
	for i := range 300 {
		if err := s.InTx(ctx, func(tx store.Tx) error {
			_, err := tx.CreateOwner(ctx, fmt.Sprintf("owner-%03d", i))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// In WAL mode only a checkpoint writes to the database file, and the
	// writer makes none: the file grows only if checkpointLoop runs.
	deadline := time.Now().Add(5 * time.Second)
	for {
		after, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if after.Size() > before.Size() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("database file still %d bytes: the WAL was never checkpointed", after.Size())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
