package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// testDB returns the DSN of a fresh schema migrated by the store, which
// creates pubsub_payloads, and a pool on it.
func testDB(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	dsn := pgtest.DSN(t)
	pool := openPool(t, dsn)
	return dsn, pool
}

// openPool opens the pool of a store on dsn, migrated and closed at the end
// of the test.
func openPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	return pgtest.Store(t, dsn).Pool()
}
