package parleybin

import (
	"path/filepath"
	"slices"
	"testing"
)

// The key covers what the build reads, embedded files included, and
// nothing else: a file the build does not read (docs, a data directory)
// does not make it build again.
func TestBuildFilesAreWhatTheBuildReads(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := buildFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go.sum", "cmd/parley/main.go", "internal/webui/static/index.html", "internal/store/sqlite/migrations/00001_init.sql"} {
		if !slices.Contains(files, filepath.Join(root, want)) {
			t.Errorf("%s is not among the build's files", want)
		}
	}
	for _, f := range files {
		if rel, _ := filepath.Rel(root, f); filepath.Ext(f) == ".md" || filepath.Base(filepath.Dir(rel)) == "parleybin" {
			t.Errorf("%s is not read by the build", rel)
		}
	}
	a, err := treeKey(root)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := treeKey(root); a != b {
		t.Errorf("two keys of one tree: %s, %s", a, b)
	}
}
