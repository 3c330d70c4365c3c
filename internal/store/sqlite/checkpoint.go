package sqlite

import (
	"context"
	"sync"
	"time"
)

// checkpointInterval is how often the write-ahead log is copied back into
// the database file.
const checkpointInterval = 250 * time.Millisecond

// checkpointLoop checkpoints the WAL from a read connection (PASSIVE: it
// copies what no reader still needs and never blocks the writer), because
// SQLite's automatic checkpoint would run on the writer connection and hold
// up every transaction behind it for milliseconds. It returns a function that
// stops the loop.
func (s *Store) checkpointLoop() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(checkpointInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// A failure (the database is busy, or closing) is retried at the
				// next tick; the WAL only grows meanwhile.
				_, _ = s.read.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}
