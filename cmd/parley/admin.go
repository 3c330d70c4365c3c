package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/store"
)

// adminTokenFile is the name, in the data dir, of the file holding the token
// made for "admin" on first start.
const adminTokenFile = "admin.token"

// bootstrapAdmin creates the owner "admin" when the database has no owner
// yet, saves its token to <data-dir>/admin.token (mode 0600) and prints it
// once. On a database that has owners it does nothing.
func bootstrapAdmin(ctx context.Context, a *app, cfg *config.Config, st store.Store) error {
	plain, created, err := auth.Bootstrap(ctx, st)
	if err != nil || !created {
		return err
	}
	path := filepath.Join(cfg.DataDir, adminTokenFile)
	saved := "also saved to " + path + ", mode 0600"
	if err := writeSecret(path, []byte(plain+"\n")); err != nil {
		// The owner exists now and will not be created again: the printed
		// token is the only copy, so say so rather than fail.
		a.log.Error("could not save the admin token; copy it from the output", "err", err)
		saved = "NOT saved to a file, copy it now"
	}
	fmt.Fprintf(a.stdout, "admin token: %s\n  (created owner %q; the token is shown only this once; %s)\n", plain, auth.AdminOwner, saved)
	return nil
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
