// Package parleybin builds the parley binary for the tests that start it as a
// process (the CLI's tests, the chaos test), once per source tree: every
// test package of a `go test ./...` runs in a process of its own, and a
// -race link of parley costs tens of seconds, so they share one build,
// found by a hash of the module's files and made under a file lock.
package parleybin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Race reports whether this test binary runs under the race detector; the
// parley it builds does too, so the processes it starts are checked alike.
var Race = race

// Path returns the path of a parley binary built from the module this test
// runs in, with -race when the test runs under it. The first caller for a
// source tree builds it; the others, in this process or another, wait for
// that build and reuse it.
func Path() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	key, err := treeKey(root)
	if err != nil {
		return "", err
	}
	base := filepath.Join(os.TempDir(), "parley-test-bin")
	dir := filepath.Join(base, key)
	bin := filepath.Join(dir, "parley")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lock(filepath.Join(dir, "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	args := []string{"build", "-o", bin + ".tmp"}
	if Race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/parley")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build parley: %v\n%s", err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		return "", err
	}
	pruneOld(base, key)
	return bin, nil
}

// moduleRoot finds the directory of go.mod above the working directory (a
// test runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("parleybin: no go.mod above the working directory")
		}
		dir = parent
	}
}

// treeKey hashes what the binary is built from: every file of the module
// but tests, docs and version control, the Go version and the race flag.
func treeKey(root string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s race=%v\n", runtime.Version(), Race)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "docs" || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, ".md") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\x00", rel)
		_, err = io.Copy(h, f)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("parleybin: hash the module: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// lock takes an exclusive lock on path, waiting for another process that
// holds it, and returns its release.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("parleybin: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// pruneOld removes the builds of other trees not used for a day, so a
// developer's temporary directory does not fill with old binaries.
func pruneOld(base, keep string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Name() == keep {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
			os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
}
