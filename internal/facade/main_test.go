package facade_test

import (
	"testing"

	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestMain drops the pooled PostgreSQL schemas (pgtest.Migrated) when the
// package's tests are over.
func TestMain(m *testing.M) { pgtest.Main(m) }
