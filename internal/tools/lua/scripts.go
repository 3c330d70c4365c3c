package lua

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// script is one compiled .lua file.
type script struct {
	name  string // the file's base name: the chunk name in error messages
	proto *glua.FunctionProto
}

// scriptSet is what a source's state is built from: its files, compiled, in
// load order, and a hash of their names and contents to notice changes.
type scriptSet struct {
	files []script
	hash  [sha256.Size]byte
}

// sourceFile is a script file's name and text, as read.
type sourceFile struct {
	name string
	code []byte
}

// readScripts reads path: one .lua file, or every .lua file directly in a
// folder, sorted by name (subfolders and other files are ignored).
func readScripts(path string) ([]sourceFile, [sha256.Size]byte, error) {
	var hash [sha256.Size]byte
	info, err := os.Stat(path)
	if err != nil {
		return nil, hash, err
	}
	paths := []string{path}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, hash, err
		}
		paths = nil
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".lua") && !strings.HasPrefix(e.Name(), ".") {
				paths = append(paths, filepath.Join(path, e.Name()))
			}
		}
		if len(paths) == 0 {
			return nil, hash, fmt.Errorf("%s: no .lua files in the folder", path)
		}
		slices.Sort(paths)
	}
	h := sha256.New()
	files := make([]sourceFile, 0, len(paths))
	for _, p := range paths {
		code, err := os.ReadFile(p)
		if err != nil {
			return nil, hash, err
		}
		name := filepath.Base(p)
		fmt.Fprintf(h, "%d:%s%d:", len(name), name, len(code))
		h.Write(code)
		files = append(files, sourceFile{name: name, code: code})
	}
	copy(hash[:], h.Sum(nil))
	return files, hash, nil
}

// compileScripts parses and compiles every file; the compiled functions are
// shared by every state built from the set.
func compileScripts(files []sourceFile, hash [sha256.Size]byte) (*scriptSet, error) {
	set := &scriptSet{hash: hash}
	var errs []error
	for _, f := range files {
		chunk, err := parse.Parse(bytes.NewReader(f.code), f.name)
		if err != nil {
			// "main.lua line:3(column:5) near 'x':   syntax error\n"
			errs = append(errs, errors.New(strings.Join(strings.Fields(err.Error()), " ")))
			continue
		}
		proto, err := glua.Compile(chunk, f.name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
			continue
		}
		set.files = append(set.files, script{name: f.name, proto: proto})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return set, nil
}

// loadScripts reads and compiles path.
func loadScripts(path string) (*scriptSet, error) {
	files, hash, err := readScripts(path)
	if err != nil {
		return nil, err
	}
	return compileScripts(files, hash)
}
