package main

import (
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatFiles: --file attaches files to the first message (the echo
// model names what it got), and refuses in words a file the server does not
// take or that is not there; in a session, /attach attaches a file to the
// next message, and a message whose file the chat's model cannot take is
// not sent: the session says why and goes on.
func TestChatFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "parley.yaml")
	if err := os.WriteFile(cfg, []byte("default_model: echo\nmodels:\n"+filesModels), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "data")
	t.Cleanup(func() { checkHistories(t, filepath.Join(dataDir, "parley.db")) })
	s := startServe(t, dir, nil, "--config", cfg, "--data-dir", dataDir)
	env := []string{"PARLEY_URL=" + s.url, "PARLEY_TOKEN=" + s.token}

	photo := filepath.Join(dir, "photo.png")
	notes := filepath.Join(dir, "notes.md")
	archive := filepath.Join(dir, "archive.zip")
	for path, data := range map[string][]byte{
		photo:   testPNG(t, color.Black),
		notes:   []byte("# Notes\n\nmilk, eggs\n"),
		archive: []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00not really a zip but it starts like one"),
	} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	r := runParley(t, dir, env, "chat", "--file", photo, "--file", notes, "What are these?")
	if r.code != 0 || !strings.Contains(r.stdout, "[image photo.png,") || !strings.Contains(r.stdout, "notes.md") {
		t.Fatalf("chat --file: exit %d, stdout %q; want the echo of both files; stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "attached photo.png (image/png, ") || !strings.Contains(r.stderr, "attached notes.md (") {
		t.Errorf("stderr does not say what was attached:\n%s", r.stderr)
	}

	for _, f := range []struct {
		name string
		path string
		want string
	}{
		{"a kind the server does not take", archive, "cannot attach " + archive + ": this kind of file can't be attached"},
		{"a missing file", filepath.Join(dir, "nope.png"), "cannot attach " + filepath.Join(dir, "nope.png") + ": no such file or directory"},
		{"a directory", dir, "cannot attach " + dir + ": not a regular file"},
		{"a kind the model does not take", photo, "photo.png: the model textonly does not take images (it takes text)"},
	} {
		r := runParley(t, dir, env, "chat", "--model", "textonly", "--file", f.path, "hi")
		if r.code != 1 || !strings.Contains(r.stderr, f.want) || r.stdout != "" || strings.Contains(r.stderr, "continue it with") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and %q, no chat", f.name, r.code, r.stdout, r.stderr, f.want)
		}
	}

	p := startChat(t, dir, env, "--model", "textonly")
	p.send("/attach")
	p.waitFor(p.stderr, "/attach: give the file to attach: /attach PATH\n")
	p.send("/attach " + photo)
	p.waitFor(p.stderr, "attached photo.png (image/png, ")
	p.send("Describe it.")
	p.waitFor(p.stderr, "the message was not sent: photo.png: the model textonly does not take images (it takes text)\n")
	p.send("/attach " + notes)
	p.waitFor(p.stderr, "attached notes.md (")
	p.send("Read it.")
	p.waitFor(p.stdout, "notes.md")
	p.send("/attach " + archive)
	p.waitFor(p.stderr, "/attach: cannot attach "+archive+": this kind of file can't be attached")
	p.send("Bye.")
	p.waitFor(p.stdout, "echo: Bye.")
	if code := p.wait(); code != 0 {
		t.Errorf("the session exited %d\nstderr:\n%s", code, p.stderr)
	}
	if strings.Contains(p.stdout.String(), "photo.png") || strings.Contains(p.stdout.String(), "archive.zip") {
		t.Errorf("a refused file reached the model:\n%s", p.stdout)
	}
}
