package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/parleyhq/parley/internal/store"
)

// classify maps constraint violations to the store's errors, keeping the
// driver's message: unique_violation is store.ErrExists,
// foreign_key_violation store.ErrNotFound.
func classify(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "23505":
		return fmt.Errorf("%w: %w", store.ErrExists, err)
	case "23503":
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return err
}

// unavailable reports whether err says the database could not be reached or
// dropped the connection, rather than refusing what was asked: connection
// exceptions (class 08), a terminated backend or a server shutting down or
// starting (57P01-57P03), and failures of the connection itself.
func unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var (
		ce *pgconn.ConnectError
		ne net.Error
	)
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed")
}

// markUnavailable wraps err with store.ErrUnavailable when unavailable says
// so, and returns it as it is otherwise.
func markUnavailable(err error) error {
	if unavailable(err) && !errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// unavailableMapper is the pool as reads outside transactions use it: a
// failure of the connection comes back wrapping store.ErrUnavailable.
type unavailableMapper struct{ q querier }

func (m unavailableMapper) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := m.q.Exec(ctx, sql, args...)
	return tag, markUnavailable(err)
}

func (m unavailableMapper) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := m.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, markUnavailable(err)
	}
	return unavailableRows{rows}, nil
}

func (m unavailableMapper) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return unavailableRow{m.q.QueryRow(ctx, sql, args...)}
}

type unavailableRows struct{ pgx.Rows }

func (r unavailableRows) Err() error { return markUnavailable(r.Rows.Err()) }

type unavailableRow struct{ pgx.Row }

func (r unavailableRow) Scan(dest ...any) error { return markUnavailable(r.Row.Scan(dest...)) }
