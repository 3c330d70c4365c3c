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

// treeKey hashes what the binary is built from: the module's files that
// go list says the build of cmd/parley reads (Go and embedded files; the
// dependencies are named by go.sum), go.mod, go.sum, the Go version and
// the race flag. Nothing else in the tree (a data directory a manual run
// left, docs) makes it build again.
func treeKey(root string) (string, error) {
	files, err := buildFiles(root)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s race=%v\n", runtime.Version(), Race)
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("parleybin: hash the build's files: %w", err)
		}
		rel, _ := filepath.Rel(root, path)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// buildFiles lists the files of the module the build of cmd/parley reads,
// with go.mod and go.sum.
func buildFiles(root string) ([]string, error) {
	args := []string{"list", "-deps", "-f", `{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`}
	if Race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/parley")...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("parleybin: go list: %w", err)
	}
	files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], root+string(filepath.Separator)) && fields[0] != root {
			continue // a dependency: go.sum names its version
		}
		for _, name := range fields[1:] {
			files = append(files, filepath.Join(fields[0], name))
		}
	}
	return files, nil
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
