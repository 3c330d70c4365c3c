package sqlite

import (
	"errors"
	"fmt"

	"github.com/parleyhq/parley/internal/store"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// classify maps SQLite constraint errors to the store's errors, keeping the
// driver's message: a duplicate key is store.ErrExists, a missing referenced
// row store.ErrNotFound.
func classify(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return fmt.Errorf("%w: %w", store.ErrExists, err)
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return err
}

// text passes encoded JSON to a TEXT column (STRICT tables refuse a BLOB);
// nil stays NULL.
func text(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
