package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chatcli"
	"github.com/parleyhq/parley/internal/config"
)

// adminTokenFile is the name, in the data dir, of the file holding the token
// made for "admin" on first start.
const adminTokenFile = "admin.token"

// adminTokenRecord is the name, in the data dir, of the file that says which
// database the token in admin.token belongs to (and which token it is), so
// that a start on another database never replaces it.
const adminTokenRecord = "admin.token.database"

// bootstrapAdmin creates the owner "admin" when the database has no owner
// yet, saves its token to <data-dir>/admin.token (mode 0600), records which
// database it belongs to in admin.token.database, and prints it once, with
// a link that signs the web UI at url in with it. On a database that has
// owners it prints how to sign in instead (see signInHint). It refuses,
// before creating the admin, to replace an admin.token of another database.
func bootstrapAdmin(ctx context.Context, a *app, cfg *config.Config, db *database, url string) error {
	path := filepath.Join(cfg.DataDir, adminTokenFile)
	record := filepath.Join(cfg.DataDir, adminTokenRecord)
	if err := checkTokenFile(ctx, path, record, db); err != nil {
		return err
	}
	plain, created, err := auth.Bootstrap(ctx, db)
	if err != nil {
		return err
	}
	if !created {
		fmt.Fprintln(a.stdout, signInHint(a, url, path, db))
		return nil
	}
	saved := "also saved to " + path + ", mode 0600"
	if err := saveAdminToken(path, record, plain, db.identity()); err != nil {
		// The owner exists now and will not be created again: the printed
		// token is the only copy, so say so rather than fail.
		a.log.Error("could not save the admin token; copy it from the output", "err", err)
		saved = "NOT saved to a file, copy it now"
	}
	fmt.Fprintf(a.stdout, "admin token: %s\n  (created owner %q; the token is shown only this once; %s)\n", plain, auth.AdminOwner, saved)
	fmt.Fprintf(a.stdout, "web UI: %s\n", signInLink(url, plain))
	return nil
}

// signInHint says, on a start that created no admin, how to sign in to the
// web UI at url, never with the token itself: with the admin token of path
// when that file holds this database's, else with a token "token create"
// makes (with the flags this serve was given that choose the database; a
// --database URL only as "…", it may hold a password).
func signInHint(a *app, url, path string, db *database) string {
	if tok, err := os.ReadFile(path); err == nil && recordedDatabase(filepath.Join(filepath.Dir(path), adminTokenRecord), strings.TrimSpace(string(tok))) == db.identity() {
		return fmt.Sprintf("sign in: open %s and paste the admin token from %s", url, path)
	}
	cmd := a.prog + " token create --owner admin --link"
	if a.flags.ConfigFile != "" {
		cmd += " --config " + chatcli.ShellQuote(a.flags.ConfigFile)
	}
	if a.flags.DataDir != "" {
		cmd += " --data-dir " + chatcli.ShellQuote(a.flags.DataDir)
	}
	if a.flags.Database != "" {
		cmd += " --database …"
	}
	return fmt.Sprintf("sign in: open %s and paste an API token; %s makes one and prints a sign-in link", url, cmd)
}

// checkTokenFile fails when an admin would be created (db has no owner)
// and path holds a token that its record does not show as this database's:
// saving the new token would replace another database's.
func checkTokenFile(ctx context.Context, path, record string, db *database) error {
	tok, readErr := os.ReadFile(path)
	if errors.Is(readErr, fs.ErrNotExist) {
		return nil
	}
	if n, err := db.CountOwners(ctx); err != nil || n > 0 {
		return err // with owners, no admin is created and nothing is written
	}
	if readErr != nil {
		return fmt.Errorf("admin token file: %w", readErr)
	}
	from := recordedDatabase(record, strings.TrimSpace(string(tok)))
	if from == db.identity() {
		return nil
	}
	of := "a database parley cannot tell (" + record + " does not describe it)"
	if from != "" {
		of = "another database, " + from
	}
	return fmt.Errorf("%s holds the admin token of %s; %s has no owner yet, and serve would create its admin and replace that file: "+
		"move the file away (delete it if that token is no longer needed), or give this database its own data directory "+
		"(--data-dir, PARLEY_DATA_DIR or data_dir: in the configuration file)", path, of, db.identity())
}

// recordedDatabase is the database the record says the token belongs to,
// or "" if there is no record or it describes another token.
func recordedDatabase(record, token string) string {
	b, err := os.ReadFile(record)
	if err != nil {
		return ""
	}
	id, _, err := auth.Parse(token)
	if err != nil {
		return ""
	}
	var database, recorded string
	for l := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSpace(l), " ")
		switch k {
		case "database":
			database = v
		case "token":
			recorded = v
		}
	}
	if recorded != id {
		return ""
	}
	return database
}

// saveAdminToken writes the token to path and its record. The old record
// goes first, so that no failure leaves a record describing another file.
func saveAdminToken(path, record, token, database string) error {
	if err := os.Remove(record); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", record, err)
	}
	if err := writeSecret(path, []byte(token+"\n")); err != nil {
		return err
	}
	id, _, err := auth.Parse(token)
	if err != nil {
		return err
	}
	return writeSecret(record, fmt.Appendf(nil,
		"# Which database the token in %s belongs to; parley serve reads it.\ndatabase %s\ntoken %s\n", adminTokenFile, database, id))
}

// writeSecret replaces the file at path with data, readable by its owner
// only. It writes a temporary file and renames it, so the file is never
// seen half-written or with wider permissions.
func writeSecret(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*") // mode 0600
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing to remove
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
