package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	pgpubsub "github.com/parleyhq/parley/internal/pubsub/postgres"
	"github.com/parleyhq/parley/internal/store"
	pgstore "github.com/parleyhq/parley/internal/store/postgres"
	"github.com/parleyhq/parley/internal/store/sqlite"
)

// database is one throwaway database of a run: a SQLite file in a temporary
// directory, or a fresh schema of a PostgreSQL database. drop removes it.
type database struct {
	kind    string // "sqlite" or "postgres"
	path    string // sqlite: the database file
	dsn     string // postgres: a DSN whose connections use the schema
	channel string // postgres: the NOTIFY channel of this run's replicas
	version string // the server's version, for the header
	drop    func() error
}

// newSQLite creates an empty SQLite database in a temporary directory.
func newSQLite() (*database, error) {
	dir, err := os.MkdirTemp("", "parley-bench-")
	if err != nil {
		return nil, fmt.Errorf("sqlite: temporary directory: %w", err)
	}
	return &database{kind: "sqlite", path: filepath.Join(dir, "parley.db"),
		drop: func() error { return os.RemoveAll(dir) }}, nil
}

// newPostgres creates the schema parley_bench_<random> in the database of
// base and returns a database whose connections use it. The DSN is used as
// given otherwise: pool size, synchronous_commit and the rest are the
// server's defaults unless base sets them.
func newPostgres(ctx context.Context, base string) (*database, error) {
	// Parsed as a pool's DSN, so pool settings (pool_max_conns) may be part
	// of it; the admin connections use its connection settings.
	pc, err := pgxpool.ParseConfig(base)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	connect := func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, pc.ConnConfig.Copy()) }
	conn, err := connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version string
	if err := conn.QueryRow(ctx, `SHOW server_version`).Scan(&version); err != nil {
		return nil, fmt.Errorf("postgres: server version: %w", err)
	}
	suffix := randomHex(6)
	schema := "parley_bench_" + suffix
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, fmt.Errorf("postgres: create schema: %w", err)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := connect(ctx)
		if err != nil {
			return fmt.Errorf("postgres: drop schema %s: %w", schema, err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("postgres: drop schema %s: %w", schema, err)
		}
		return nil
	}
	dsn, err := withSearchPath(base, schema)
	if err != nil {
		return nil, errors.Join(err, drop())
	}
	return &database{kind: "postgres", dsn: dsn, channel: schema, version: "PostgreSQL " + version, drop: drop}, nil
}

// withSearchPath returns dsn (a URL or a key=value string) with its
// connections' search_path set to schema.
func withSearchPath(dsn, schema string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("postgres: parse DSN: %w", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return dsn + " search_path=" + schema, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// replica is what one `parley serve` process holds on a database: a
// migrated store and the pubsub that goes with it (in-process for SQLite,
// LISTEN/NOTIFY for PostgreSQL), opened as serve opens them.
type replica struct {
	db *database
	st store.Store
	ps pubsub.PubSub
	pg *pgstore.Store // set on PostgreSQL
}

// open starts a replica on the database.
func (d *database) open(ctx context.Context, log *slog.Logger) (*replica, error) {
	r := &replica{db: d}
	switch d.kind {
	case "sqlite":
		s, err := sqlite.Open(ctx, d.path)
		if err != nil {
			return nil, err
		}
		if err := s.Migrate(ctx); err != nil {
			s.Close()
			return nil, err
		}
		if d.version == "" {
			d.version = sqliteVersion(ctx, d.path)
		}
		r.st, r.ps = s, memory.New()
	case "postgres":
		s, err := pgstore.Open(ctx, d.dsn)
		if err != nil {
			return nil, err
		}
		if err := s.Migrate(ctx); err != nil {
			s.Close()
			return nil, err
		}
		ps, err := pgpubsub.New(ctx, s.Pool(), log, pgpubsub.WithChannel(d.channel))
		if err != nil {
			s.Close()
			return nil, err
		}
		r.st, r.ps, r.pg = s, ps, s
	}
	return r, nil
}

// close stops the pubsub, then the store.
func (r *replica) close() error {
	return errors.Join(r.ps.Close(), r.st.Close())
}

// poolSize describes the connections the replica's store writes through.
func (r *replica) poolSize() string {
	if r.pg != nil {
		return fmt.Sprintf("pool of %d", r.pg.Pool().Config().MaxConns)
	}
	return "1 writer conn"
}

// sqliteDSN mirrors the writer connection settings of internal/store/sqlite
// (dsn in store.go): WAL, synchronous=NORMAL, BEGIN IMMEDIATE, busy timeout,
// foreign keys. Keep them in step, or the raw rate stops being comparable.
func sqliteDSN(path string) string {
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "1")
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_txlock", "immediate")
	return path + "?" + q.Encode()
}

// sqliteVersion asks the driver for the SQLite library's version.
func sqliteVersion(ctx context.Context, path string) string {
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return "SQLite"
	}
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&v); err != nil {
		return "SQLite"
	}
	return "SQLite " + v
}

// committer runs one single-row INSERT transaction on a scratch table.
type committer struct {
	commit func(ctx context.Context, v int64) error
	close  func() error
}

// rawCommits measures the database's raw commit rate as the store meets it:
// conc goroutines (the engine's concurrency) each run single-row INSERT
// transactions into a scratch table for d, through the same driver and the
// same pool settings as the store: the store's own pgx pool on PostgreSQL, a
// one-connection database/sql pool with the store's settings on SQLite.
func (r *replica) rawCommits(ctx context.Context, conc int, d time.Duration) (float64, error) {
	c, err := r.committer(ctx)
	if err != nil {
		return 0, err
	}
	defer c.close()
	// A short warm-up fills the pool and the caches, as the engine's runs
	// find them.
	if err := hammer(ctx, c, conc, d/10, nil); err != nil {
		return 0, err
	}
	var n atomic.Int64
	start := time.Now()
	if err := hammer(ctx, c, conc, d, &n); err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// hammer runs commits on conc goroutines for d, counting them in n.
func hammer(ctx context.Context, c committer, conc int, d time.Duration, n *atomic.Int64) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for g := range conc {
		wg.Go(func() {
			for i := int64(g); ctx.Err() == nil; i += int64(conc) {
				if err := c.commit(ctx, i); err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						firstErr = cmp.Or(firstErr, err)
						mu.Unlock()
						cancel()
					}
					return
				}
				if n != nil {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// committer opens the scratch table and its single-row transaction.
func (r *replica) committer(ctx context.Context) (committer, error) {
	if r.pg != nil {
		pool := r.pg.Pool()
		if _, err := pool.Exec(ctx, `CREATE TABLE bench_commits (id bigserial PRIMARY KEY, v bigint NOT NULL, at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return committer{}, fmt.Errorf("raw commits: create scratch table: %w", err)
		}
		return committer{
			commit: func(ctx context.Context, v int64) error {
				tx, err := pool.Begin(ctx)
				if err != nil {
					return fmt.Errorf("raw commits: begin: %w", err)
				}
				defer tx.Rollback(context.WithoutCancel(ctx))
				if _, err := tx.Exec(ctx, `INSERT INTO bench_commits (v) VALUES ($1)`, v); err != nil {
					return fmt.Errorf("raw commits: insert: %w", err)
				}
				return tx.Commit(ctx)
			},
			close: func() error {
				_, err := pool.Exec(context.Background(), `DROP TABLE bench_commits`)
				return err
			},
		}, nil
	}
	db, err := sql.Open("sqlite", sqliteDSN(r.db.path))
	if err != nil {
		return committer{}, fmt.Errorf("raw commits: %w", err)
	}
	db.SetMaxOpenConns(1) // as the store's writer pool
	db.SetMaxIdleConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE bench_commits (id INTEGER PRIMARY KEY AUTOINCREMENT, v INTEGER NOT NULL, at INTEGER NOT NULL)`); err != nil {
		db.Close()
		return committer{}, fmt.Errorf("raw commits: create scratch table: %w", err)
	}
	return committer{
		commit: func(ctx context.Context, v int64) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return fmt.Errorf("raw commits: begin: %w", err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, `INSERT INTO bench_commits (v, at) VALUES (?, ?)`, v, time.Now().UnixMicro()); err != nil {
				return fmt.Errorf("raw commits: insert: %w", err)
			}
			return tx.Commit()
		},
		close: func() error {
			_, err := db.ExecContext(context.Background(), `DROP TABLE bench_commits`)
			return errors.Join(err, db.Close())
		},
	}, nil
}
