package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newMigrateCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply database migrations and exit",
		Long: `Apply every database migration the configured database lacks, then exit.

serve (and every other command that opens the database) applies missing
migrations by itself, so migrate is optional. Run it to upgrade the schema
once, before a rolling upgrade of several PostgreSQL replicas, or to check
that a database URL works. Applying migrations to an up-to-date database
changes nothing.`,
		Example: `  # The embedded SQLite database in ./parley-data
  parley migrate

  # A PostgreSQL database
  parley migrate --database postgres://parley@db.internal:5432/parley`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := a.openDatabase(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			fmt.Fprintf(a.stdout, "%s: migrations applied, schema up to date\n", db.describe())
			return nil
		},
	}
}
