package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// queryAll runs a query and reads every row of its result with scan.
func queryAll[T any](ctx context.Context, q querier, scan func(dbutil.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return dbutil.Collect(rows, scan)
}

// notFound is store.ErrNotFound for a query that found no row, else err.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}
