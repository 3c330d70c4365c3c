package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/llm/catalog"
)

func newServeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API server and the web UI",
		Long: `Run the parley HTTP API server until SIGINT or SIGTERM. It also serves
the web UI at /, which uses the API with an API token.

serve first checks what a setting can break, before it touches the
database: it binds the listen address, loads the tools (Lua sources; MCP
servers that are down do not stop it) and makes the models (API keys), so a
start that fails leaves nothing behind. It then applies any missing database
migrations and, on a database with no owner at all, creates the owner
"admin", prints its token once and saves it to <data-dir>/admin.token
(mode 0600), unless that file holds the token of another database: then it
stops and says so. With the token it prints a link that opens the web UI
signed in ("web UI: http://ADDR/#token=TOKEN"; the token is in the URL
fragment, which the browser does not send to the server). A later start
never prints the token: it prints how to sign in instead ("sign in: ..."),
naming <data-dir>/admin.token when that file holds this database's admin
token, else the "parley token create" command that makes one. It then prints the
address it listens on, once ("parley listening on http://ADDR"; a wildcard
host as 127.0.0.1): with --listen 127.0.0.1:0 it is the port the system
picked. Opening that address shows the web UI's sign-in form, which takes an
API token (the admin's, or one from "parley token create").

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
//
// Everything that can fail because of a setting is checked before the
// database is touched: the listen address is bound, the tools are built
// (Lua sources load; MCP servers that are down do not stop the start) and
// the models are made (API keys read). A start that fails on any of these
// leaves nothing behind: no data directory, no database, no admin.token.
func serve(ctx context.Context, a *app, cfg *config.Config) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := listen(cfg.Listen)
	if err != nil {
		return err
	}
	defer ln.Close() // closed by the HTTP server once it serves; again is harmless

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	toolReg, err := newTools(cfg, a.log, reg)
	if err != nil {
		return err
	}
	defer toolReg.Close()
	if err := checkAgentTools(cfg, toolReg, a.log); err != nil {
		return err
	}
	models, err := catalog.New(cfg, a.getenv, a.log)
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}

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

	if err := bootstrapAdmin(ctx, a, cfg, db, openableURL(ln.Addr())); err != nil {
		return err
	}

	ps, err := db.newPubSub(ctx, a.log)
	if err != nil {
		return err
	}
	defer ps.Close()

	stopEngine := startEngine(ctx, cfg, models, db.Store, ps, toolReg, a.log)
	// Runs after the HTTP server stopped: running chats are handed back
	// (pending) so another replica continues them at once.
	defer stopEngine()
	stopWebhooks, err := startWebhooks(ctx, cfg, db.Store, ps, toolReg, reg, a.log)
	if err != nil {
		return err
	}
	defer stopWebhooks()

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

	// The address is printed once for people and scripts. The log line is
	// for logs collected apart from stdout; when stdout is a terminal, the
	// person reading it would see the address twice, so it is debug there.
	fmt.Fprintf(a.stdout, "parley listening on %s\n", openableURL(ln.Addr()))
	level := slog.LevelInfo
	if isTerminal(a.stdout) {
		level = slog.LevelDebug
	}
	a.log.Log(ctx, level, "listening", "addr", ln.Addr().String(), "url", openableURL(ln.Addr()))

	return runHTTP(ctx, ln, handler, a.log, stop)
}

// listen binds the configured address. Its error says which setting to
// change, since the address may come from a flag, the environment or the
// configuration file.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	why := err.Error()
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		why = opErr.Err.Error()
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		why = "the address is already in use (another parley serve, or another program)"
	}
	return nil, fmt.Errorf("listen %s: %s; choose another address with --listen, PARLEY_LISTEN or listen: in the configuration file", addr, why)
}

// openableURL is the URL a person can open for a listener's address: a
// wildcard host (":8080", "0.0.0.0:8080", "[::]:8080"), which answers on
// every interface, is shown as 127.0.0.1, which it answers on too.
func openableURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
