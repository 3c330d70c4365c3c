package pgtest

import (
	"context"
	"log/slog"
	"testing"

	pgpubsub "github.com/parleyhq/parley/internal/pubsub/postgres"
	"github.com/parleyhq/parley/internal/store/postgres"
	"github.com/parleyhq/parley/internal/testutil/invariant"
)

// Store opens a store on dsn (from DSN) and migrates it; it is closed when
// the test ends, after every chat's history is checked (invariant.Check).
func Store(t testing.TB, dsn string) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Runs before the close above, after whatever the test starts later
	// (engines, servers) has stopped.
	t.Cleanup(func() { invariant.Check(t, st) })
	return st
}

// Replica opens what one parley replica has of its own on the database of
// dsn: a migrated store (its pool) and a pubsub listening on channel on a
// connection of its own. log may be nil. Both are closed when the test
// ends.
func Replica(t testing.TB, dsn, channel string, log *slog.Logger) (*postgres.Store, *pgpubsub.PubSub) {
	t.Helper()
	st := Store(t, dsn)
	ps, err := pgpubsub.New(context.Background(), st.Pool(), log, pgpubsub.WithChannel(channel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	return st, ps
}

// Migrated is DSN on a schema parley's migrations have already made, every
// table empty, taken from this process's pool (MigratedDSN): a test that
// opens its store with Store or Replica then skips the half second a
// migration costs. A package that uses it calls DropPool in TestMain.
func Migrated(t testing.TB) string {
	t.Helper()
	return MigratedDSN(t, func(ctx context.Context, dsn string) error {
		st, err := postgres.Open(ctx, dsn)
		if err != nil {
			return err
		}
		defer st.Close()
		return st.Migrate(ctx)
	})
}
