package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/config"
)

func newServeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API server",
		Long: `Run the parley HTTP API server until SIGINT or SIGTERM.

serve applies any missing database migrations, then, on a database with no
owner at all, creates the owner "admin", prints its token once and saves it
to <data-dir>/admin.token (mode 0600). It then prints the address it
listens on ("parley listening on http://ADDR"): with --listen 127.0.0.1:0 it
is the port the system picked.

On SQLite (the default: sqlite://<data-dir>/parley.db) only one serve process
may use a database file: a second one refuses to start. To run several
replicas, give them all the same postgres:// URL; they coordinate through the
database alone.

On SIGINT or SIGTERM, serve stops accepting connections, lets requests in
flight finish, ends open event streams and exits with status 0.`,
		Example: `  # Embedded default: SQLite in ./parley-data, http://127.0.0.1:8080
  parley serve

  # Another address and data directory
  parley serve --listen 0.0.0.0:9000 --data-dir /var/lib/parley

  # One of several replicas on PostgreSQL
  PARLEY_DATABASE_URL=postgres://parley@db:5432/parley parley serve --listen :8080

  # With a configuration file (models, tools, limits)
  parley serve --config /etc/parley/parley.yaml`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			return serve(cmd.Context(), a, cfg)
		},
	}
	cmd.Flags().StringVar(&a.flags.Listen, "listen", "", "`address` to listen on, HOST:PORT (env PARLEY_LISTEN; default 127.0.0.1:8080)")
	return cmd
}

// serve runs the server until ctx ends or a SIGINT/SIGTERM arrives.
func serve(ctx context.Context, a *app, cfg *config.Config) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	release, err := lockSQLite(cfg)
	if err != nil {
		return err
	}
	defer release()

	db, err := openDatabase(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	a.log.Info("database ready", "database", db.describe())

	if err := bootstrapAdmin(ctx, a, cfg, db); err != nil {
		return err
	}

	ps, err := db.newPubSub(ctx, a.log)
	if err != nil {
		return err
	}
	defer ps.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	toolReg, err := newTools(cfg, a.log, reg)
	if err != nil {
		return err
	}
	defer toolReg.Close()
	stopEngine, err := startEngine(ctx, cfg, a.getenv, db.Store, ps, toolReg, a.log)
	if err != nil {
		return err
	}
	// Runs after the HTTP server stopped: running chats are handed back
	// (pending) so another replica continues them at once.
	defer stopEngine()

	handler, err := api.New(api.Deps{
		Config:   cfg,
		Store:    db.Store,
		PubSub:   ps,
		Logger:   a.log,
		Registry: reg,
		Tools:    toolReg,
	})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "parley listening on http://%s\n", ln.Addr())
	a.log.Info("listening", "addr", ln.Addr().String())

	return runHTTP(ctx, ln, handler, a.log, stop)
}
