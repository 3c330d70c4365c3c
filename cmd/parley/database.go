package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	pgpubsub "github.com/parleyhq/parley/internal/pubsub/postgres"
	"github.com/parleyhq/parley/internal/store"
	pgstore "github.com/parleyhq/parley/internal/store/postgres"
	"github.com/parleyhq/parley/internal/store/sqlite"
)

// database is an open, migrated store with what the backend-specific parts
// of serve need.
type database struct {
	store.Store
	kind  string         // "sqlite" or "postgres"
	where string         // the file, or the URL without its password, for messages
	dsn   string         // the URL as configured, password included
	pg    *pgstore.Store // set on PostgreSQL
}

// openDatabase opens the configured database and applies the migrations it
// lacks, so that every command works on a fresh database. Every command that
// touches the database opens it here.
func openDatabase(ctx context.Context, cfg *config.Config) (*database, error) {
	kind, dsn, err := config.Backend(cfg.Database)
	if err != nil {
		return nil, err
	}
	db := &database{kind: kind, dsn: dsn}
	var migrate func(context.Context) error
	switch kind {
	case "sqlite":
		db.where = dsn
		if err := makeDBDir(dsn); err != nil {
			return nil, err
		}
		s, err := sqlite.Open(ctx, dsn)
		if err != nil {
			return nil, err
		}
		db.Store, migrate = s, s.Migrate
	case "postgres":
		db.where = redact(dsn)
		s, err := pgstore.Open(ctx, dsn)
		if err != nil {
			return nil, err
		}
		db.Store, db.pg, migrate = s, s, s.Migrate
	}
	if err := migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// lockSQLite makes this process the only server of a SQLite database; on
// PostgreSQL there is nothing to lock and release does nothing. The error
// of a lock held by another process is returned as is: it explains itself.
func lockSQLite(cfg *config.Config) (release func() error, err error) {
	kind, path, err := config.Backend(cfg.Database)
	if err != nil {
		return nil, err
	}
	if kind != "sqlite" {
		return func() error { return nil }, nil
	}
	if err := makeDBDir(path); err != nil {
		return nil, err
	}
	return sqlite.Lock(path)
}

// makeDBDir creates the directory of a SQLite database if it is missing,
// readable by this user only: it holds the database (and, by default,
// admin.token).
func makeDBDir(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("database directory: %w", err)
	}
	return nil
}

// newPubSub returns the pubsub that goes with the database: in-process for
// SQLite (one process is the whole server), LISTEN/NOTIFY for PostgreSQL.
func (db *database) newPubSub(ctx context.Context, log *slog.Logger) (pubsub.PubSub, error) {
	if db.pg == nil {
		return memory.New(), nil
	}
	ps, err := pgpubsub.New(ctx, db.pg.Pool(), log)
	if err != nil {
		return nil, err
	}
	return ps, nil
}

// redact hides the password of a database URL.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable database URL)"
	}
	return u.Redacted()
}

// identity names the database itself, the same whichever way it is
// reached: a SQLite file by its absolute path; a PostgreSQL database by
// user, host, port, name and search_path, without password or other options.
func (db *database) identity() string {
	if db.pg == nil {
		if abs, err := filepath.Abs(db.where); err == nil {
			return "sqlite://" + abs
		}
		return "sqlite://" + db.where
	}
	c, err := pgconn.ParseConfig(db.dsn)
	if err != nil {
		return db.where
	}
	u := url.URL{Scheme: "postgres", User: url.User(c.User), Host: net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), Path: "/" + c.Database}
	if sp := c.RuntimeParams["search_path"]; sp != "" {
		u.RawQuery = url.Values{"search_path": {sp}}.Encode()
	}
	return u.String()
}

// describe names the database for messages, like "sqlite database parley-data/parley.db".
func (db *database) describe() string { return fmt.Sprintf("%s database %s", db.kind, db.where) }
