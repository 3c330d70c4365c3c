package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	got := redact("postgres://parley:s3cret@db:5432/parley?sslmode=require")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "parley:xxxxx@db:5432/parley") {
		t.Errorf("redact = %q", got)
	}
	if got := redact("postgres://parley@db/parley"); got != "postgres://parley@db/parley" {
		t.Errorf("redact without password = %q", got)
	}
}

// TestWriteSecretReplacesWiderFile: an admin.token left with a wider mode is
// replaced by a 0600 file, never rewritten in place.
func TestWriteSecretReplacesWiderFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "admin.token")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSecret(path, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	checkMode(t, path, 0o600)
	if got := readTrim(t, path); got != "new" {
		t.Errorf("content = %q", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}
