package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrateLockKey is the first key of the advisory lock that Migrate holds;
// the second is the hash of the schema, so that different schemas of one
// database migrate independently.
const migrateLockKey = 0x7061726c // "parl"

// Migrate applies the embedded migrations that the database lacks; with none
// missing it changes nothing. Replicas starting at once are safe: each waits
// for a session advisory lock before goose looks at the schema, so one
// migrates and the others find nothing left to do.
func (s *Store) Migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("migrate postgres: %w", err)
	}
	// A dedicated connection carries the lock: closing it releases the lock
	// even if unlocking fails, so no pooled session keeps it.
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("migrate postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(coalesce(current_schema(), '')))`, migrateLockKey); err != nil {
		return fmt.Errorf("migrate postgres: lock: %w", err)
	}

	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrate postgres: %w", err)
	}
	_, upErr := p.Up(ctx)
	_, unlockErr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, hashtext(coalesce(current_schema(), '')))`, migrateLockKey)
	if err := errors.Join(upErr, unlockErr); err != nil {
		return fmt.Errorf("migrate postgres: %w", err)
	}
	return nil
}
