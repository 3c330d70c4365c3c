package main

import (
	"errors"
	"fmt"
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
	var owner, name string
	cmd := &cobra.Command{
		Use:   "create --owner NAME [--name LABEL]",
		Short: "Create a token (and its owner if needed)",
		Long: `Create a token for an owner, creating the owner if it does not exist yet,
and print the token alone on standard output, so that scripts can capture it.
It is shown only this once; the database keeps only its hash.

Owner names are 1-63 characters: lower-case letters, digits, "_", "." and
"-", starting with a letter or digit.`,
		Example: `  TOKEN=$(parley token create --owner alice --name laptop)
  curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8080/api/v1/chats`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if owner == "" {
				return &usageError{cmd: cmd.CommandPath(), err: errors.New("--owner is required")}
			}
			if err := auth.ValidOwner(owner); err != nil {
				return fmt.Errorf("--owner: %w", err) // a wrong value, not a wrong command line: exit 1
			}
			db, err := a.openDatabase(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			plain, tok, err := auth.Issue(cmd.Context(), db, owner, name)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, plain)
			fmt.Fprintf(a.stderr, "created token %s for owner %s; it is shown only this once\n", tok.ID, tok.Owner)
			return nil
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "the `name` of the owner the token acts as (required)")
	cmd.Flags().StringVar(&name, "name", "", "a `label` to recognize the token by in token list")
	return cmd
}

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
