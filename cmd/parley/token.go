package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/store"
)

func newTokenCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens",
		Long: `Create, list and revoke the API tokens clients send as
"Authorization: Bearer <token>". A token belongs to an owner; an owner sees
only its own chats.

These commands work on the database directly (the same --config, --data-dir
and --database settings as serve), so they also work while the server runs.
Only a hash of each token is stored: a token's secret is shown once, when it
is created.`,
		Args: args(noCommand),
		RunE: helpOnly,
	}
	cmd.AddCommand(newTokenCreateCmd(a), newTokenListCmd(a), newTokenRevokeCmd(a))
	return cmd
}

func newTokenCreateCmd(a *app) *cobra.Command {
	var owner, name, baseURL string
	var link bool
	cmd := &cobra.Command{
		Use:   "create --owner NAME [--name LABEL] [--link] [--base-url URL]",
		Short: "Create a token (and its owner if needed)",
		Long: `Create a token for an owner, creating the owner if it does not exist yet,
and print the token alone on standard output, so that scripts can capture it.
It is shown only this once; the database keeps only its hash.

A sign-in link for the web UI (BASE/#token=TOKEN) follows on standard error;
with --link it is printed on standard output instead of the token. The base
is --base-url, or else the configured listen address (a wildcard host shown
as 127.0.0.1): give --base-url when people reach the server by another name,
through a proxy say.

Owner names are 1-63 characters: lower-case letters, digits, "_", "." and
"-", starting with a letter or digit.`,
		Example: `  TOKEN=$(parley token create --owner alice --name laptop)
  curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8080/api/v1/chats
  parley token create --owner bob --link --base-url https://parley.example.com`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if owner == "" {
				return &usageError{cmd: cmd.CommandPath(), err: errors.New("--owner is required")}
			}
			if err := auth.ValidOwner(owner); err != nil {
				return fmt.Errorf("--owner: %w", err) // a wrong value, not a wrong command line: exit 1
			}
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			base, err := signInBase(baseURL, cfg.Listen)
			if err != nil {
				return err
			}
			db, err := openDatabase(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer db.Close()
			plain, tok, err := auth.Issue(cmd.Context(), db, owner, name)
			if err != nil {
				return err
			}
			signIn := signInLink(base, plain)
			if link {
				fmt.Fprintln(a.stdout, signIn)
			} else {
				fmt.Fprintln(a.stdout, plain)
			}
			fmt.Fprintf(a.stderr, "created token %s for owner %s; it is shown only this once\n", tok.ID, tok.Owner)
			if !link {
				fmt.Fprintf(a.stderr, "web UI: %s\n", signIn)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "the `name` of the owner the token acts as (required)")
	cmd.Flags().StringVar(&name, "name", "", "a `label` to recognize the token by in token list")
	cmd.Flags().BoolVar(&link, "link", false, "print the web UI's sign-in link on stdout instead of the token")
	cmd.Flags().StringVar(&baseURL, "base-url", "", "the web UI's `URL` for the sign-in link (default: the listen address)")
	return cmd
}

// signInBase is the web UI's address for a sign-in link: flag, an http or
// https URL (a trailing slash dropped), or else the listen address.
func signInBase(flag, listen string) (string, error) {
	if flag == "" {
		return openableURL(configuredAddr(listen)), nil
	}
	u, err := url.Parse(flag)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" || u.RawQuery != "" {
		return "", fmt.Errorf("--base-url %q: want an http:// or https:// URL without a query or fragment, like https://parley.example.com", flag)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// signInLink is the link that signs the web UI at base in with token. The
// token goes in the fragment, which browsers never send to the server (nor
// put in a Referer); the page takes it from there.
func signInLink(base, token string) string { return base + "/#token=" + token }

// configuredAddr is a configured listen address as a net.Addr, for openableURL.
type configuredAddr string

func (a configuredAddr) Network() string { return "tcp" }
func (a configuredAddr) String() string  { return string(a) }

func newTokenListCmd(a *app) *cobra.Command {
	var owner string
	cmd := &cobra.Command{
		Use:   "list [--owner NAME]",
		Short: "List tokens",
		Long: `List tokens, oldest first, as a table: id, owner, name, creation time and
revocation time ("-" for a token in use). Secrets are never shown: they are
not stored.`,
		Example: `  parley token list
  parley token list --owner alice`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := a.openDatabase(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			toks, err := db.ListTokens(cmd.Context(), owner)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tOWNER\tNAME\tCREATED\tREVOKED")
			for _, t := range toks {
				revoked := "-"
				if t.RevokedAt != nil {
					revoked = stamp(*t.RevokedAt)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Owner, orDash(t.Name), stamp(t.CreatedAt), revoked)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "list only this owner's tokens")
	return cmd
}

func newTokenRevokeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token",
		Long: `Revoke a token: from now on, requests that carry it are answered 401.
Give the token's id (the ID column of token list) or the whole token.
Revoking a revoked token changes nothing; an unknown id is an error.`,
		Example: `  parley token revoke k3v5xq7mzt2bha4c
  parley token revoke "$TOKEN"`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id := argv[0]
			if tid, _, err := auth.Parse(id); err == nil {
				id = tid // a whole token was given
			}
			db, err := a.openDatabase(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			ctx := cmd.Context()
			tok, err := db.GetToken(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no token with id %q (see parley token list)", id)
			}
			if err != nil {
				return err
			}
			if tok.RevokedAt != nil {
				fmt.Fprintf(a.stdout, "token %s (owner %s) was already revoked at %s\n", tok.ID, tok.Owner, stamp(*tok.RevokedAt))
				return nil
			}
			if err := db.InTx(ctx, func(tx store.Tx) error { return tx.RevokeToken(ctx, id) }); err != nil {
				return fmt.Errorf("revoke token %s: %w", id, err)
			}
			fmt.Fprintf(a.stdout, "revoked token %s (owner %s)\n", tok.ID, tok.Owner)
			return nil
		},
	}
}

// stamp formats a time for tables and messages: UTC, to the second.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
