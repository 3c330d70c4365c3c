package postgres

import (
	"errors"
	"fmt"

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
