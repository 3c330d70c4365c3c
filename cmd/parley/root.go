package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// newRootCmd builds the parley command tree around a.
func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "parley",
		Short: "A self-hosted LLM agent chat server",
		Long: `parley is a self-hosted LLM agent chat server: clients create chats, send
messages and watch the answers stream in; the model can call server-side
tools and tools that the API client runs itself.

With no configuration, "parley serve" keeps everything in an embedded SQLite
database in ./parley-data and answers on http://127.0.0.1:8080. Point
--database at a postgres:// URL to run several replicas on one PostgreSQL
database.

Settings come from, in increasing priority: built-in defaults, the YAML file
given by --config or PARLEY_CONFIG, PARLEY_* environment variables, and
flags. See docs/configuration.md.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          args(noCommand),
		RunE:          helpOnly,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{cmd: c.CommandPath(), err: err}
	})
	f := root.PersistentFlags()
	f.StringVar(&a.flags.ConfigFile, "config", "", "YAML configuration `file` (env PARLEY_CONFIG)")
	f.StringVar(&a.flags.DataDir, "data-dir", "", "`dir`ectory for the SQLite database and admin.token (env PARLEY_DATA_DIR; default ./parley-data)")
	f.StringVar(&a.flags.Database, "database", "", "database `url`: sqlite://PATH or postgres://... (env PARLEY_DATABASE_URL; default sqlite://<data-dir>/parley.db)")
	f.StringVar(&a.flags.LogLevel, "log-level", "", "log `level`: debug, info, warn or error (env PARLEY_LOG_LEVEL; default info)")

	root.AddCommand(newServeCmd(a), newMigrateCmd(a), newTokenCmd(a), newChatCmd(a))
	return root
}

// args checks a command's positional arguments and reports a mismatch as a
// usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, a []string) error {
		if err := check(c, a); err != nil {
			return &usageError{cmd: c.CommandPath(), err: err}
		}
		return nil
	}
}

// noCommand refuses arguments to a command that only groups others: the
// first one is an unknown command, like "parley server".
func noCommand(c *cobra.Command, a []string) error {
	if len(a) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", a[0], c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default for its suggestions
	}
	if s := c.SuggestionsFor(a[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return errors.New(msg)
}

// helpOnly is the action of a command that only groups others: given no
// command, it shows its help. (Without an action of its own, cobra would
// show the help and exit 0 for an unknown command too.)
func helpOnly(c *cobra.Command, _ []string) error { return c.Help() }

// version is the module version the binary was built from; for a build
// from a checkout, "devel" with the commit and its time (and "+dirty" when
// the tree had changes), as the build recorded them.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return versionOf(bi)
}

// versionOf is version for the given build information.
func versionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	setting := func(key string) string {
		for _, s := range bi.Settings {
			if s.Key == key {
				return s.Value
			}
		}
		return ""
	}
	rev := setting("vcs.revision")
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel " + rev
	if t := setting("vcs.time"); t != "" {
		v += " " + t
	}
	if setting("vcs.modified") == "true" {
		v += "+dirty"
	}
	return v
}
