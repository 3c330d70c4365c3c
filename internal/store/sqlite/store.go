// Package sqlite is the embedded store.Store: one process, one SQLite file
// (pure Go, modernc.org/sqlite), no configuration.
//
// Writes are serialized by design: every InTx runs on the one connection of
// the writer pool, in a BEGIN IMMEDIATE transaction, so concurrent
// transactions wait their turn in the pool instead of failing with
// SQLITE_BUSY. Reads outside transactions use a separate pool of read-only
// connections, which WAL lets run alongside the writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/parleyhq/parley/internal/batch"
	"github.com/parleyhq/parley/internal/store"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// busyTimeoutMillis is how long a connection waits for a lock held by
// another process (a CLI command next to the server) before SQLITE_BUSY.
const busyTimeoutMillis = 10000

// Store is the SQLite store.Store.
type Store struct {
	reader        // reads outside transactions, on the read pool
	path   string // the database file
	write  *sql.DB
	read   *sql.DB
	// Prepared statements of each pool.
	writeStmts, readStmts *stmtCache
	group                 *batch.Batcher[*txCall, txResult] // InTx calls waiting for the writer
	stopCheckpoints       func()
}

var _ store.Store = (*Store)(nil)

// Open opens (creating it and its directory if needed) the SQLite database
// at path. It does not migrate: call Migrate.
func Open(ctx context.Context, path string) (*Store, error) {
	switch {
	case path == "" || strings.Contains(path, "?"):
		return nil, fmt.Errorf("open sqlite: invalid database path %q", path)
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		// Each pool would see a database of its own.
		return nil, fmt.Errorf("open sqlite: %q: want the path of a database file", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	write, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// One writer connection: transactions queue here, never on SQLITE_BUSY.
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	// The writer connects first: it creates the file and switches it to WAL
	// before a read-only connection can look at it.
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	read, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	n := max(4, runtime.NumCPU())
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	s := &Store{path: path, write: write, read: read, writeStmts: newStmtCache(write), readStmts: newStmtCache(read)}
	s.group = &batch.Batcher[*txCall, txResult]{Max: maxGroup,
		Commit: func(calls []*txCall) ([]txResult, error) { return s.commitGroup(calls), nil }}
	s.reader = reader{q: cached{c: s.readStmts}}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.stopCheckpoints = s.checkpointLoop()
	return s, nil
}

// dsn is the modernc.org/sqlite data source name of one pool's connections.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeoutMillis))
	q.Set("_foreign_keys", "1")
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_txlock", "immediate")
	if readOnly {
		q.Set("_query_only", "1")
	} else {
		// The writer never checkpoints: a checkpoint on the one writer
		// connection stalls every transaction behind it. checkpointLoop does
		// it from a reader instead.
		q.Set("_pragma", "wal_autocheckpoint(0)")
	}
	return path + "?" + q.Encode()
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Ping checks that both pools answer.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.write.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite %s: %w", s.path, err)
	}
	if err := s.read.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite %s: %w", s.path, err)
	}
	return nil
}

// Close closes both pools.
func (s *Store) Close() error {
	if s.stopCheckpoints != nil {
		s.stopCheckpoints()
	}
	s.readStmts.close()
	s.writeStmts.close()
	return errors.Join(s.read.Close(), s.write.Close())
}

// querier is what reader needs of a pool or a transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// reader runs the store.Reader queries on a pool or inside a transaction.
type reader struct{ q querier }

// tx is the store.Tx of one InTx call.
type tx struct {
	reader
	after []func() // AfterCommit's functions of the call running
}

func (t *tx) AfterCommit(fn func()) { t.after = append(t.after, fn) }

var _ store.Tx = (*tx)(nil)
