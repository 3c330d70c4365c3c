package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrLocked is the cause of Lock's error when another process holds the lock.
var ErrLocked = errors.New("sqlite database is locked by another parley process")

// lockedError is Lock's answer when the lock is taken: it says why the
// server cannot start and what to do instead.
type lockedError struct{ path string }

func (e *lockedError) Error() string {
	return fmt.Sprintf("another parley process is already serving %s: SQLite allows one server process; "+
		"stop it, or use PostgreSQL (postgres://...) to run several replicas", e.path)
}

func (e *lockedError) Unwrap() error { return ErrLocked }

// Lock takes an exclusive, non-blocking lock on <dbPath>.lock, held until
// release is called or the process ends, so that only one server process
// serves a SQLite database (a second one would miss the first one's
// in-process notifications). Commands that only read or write the database
// (token create) do not take it. If another process holds the lock, the
// error wraps ErrLocked.
func Lock(dbPath string) (release func() error, err error) {
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dbPath, err)
	}
	name := dbPath + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dbPath, err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, &lockedError{path: dbPath}
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return sync.OnceValue(func() error {
		// Closing the file drops the lock; the file itself stays, so a
		// waiting process never locks a file that is being removed.
		if err := f.Close(); err != nil {
			return fmt.Errorf("unlock %s: %w", name, err)
		}
		return nil
	}), nil
}
