package chatcli

import (
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/testutil/imagetest"
)

// TestChatFiles: Files (--file) attaches files to the first message (the echo
// model names what it got), and refuses in words a file the server does not
// take or that is not there; in a session, /attach attaches a file to the
// next message, and a message whose file the chat's model cannot take is
// not sent: the session says why and goes on.
func TestChatFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newServer(t, nil, func(cfg *config.Config) {
		cfg.Models = append(cfg.Models, config.Model{Name: "textonly", Provider: "echo", Model: "echo", Inputs: []string{"text"}})
	})
	access := Options{URL: s.url, Token: s.token}

	photo := filepath.Join(dir, "photo.png")
	notes := filepath.Join(dir, "notes.md")
	archive := filepath.Join(dir, "archive.zip")
	for path, data := range map[string][]byte{
		photo:   imagetest.PNG(t, color.Black),
		notes:   []byte("# Notes\n\nmilk, eggs\n"),
		archive: []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00not really a zip but it starts like one"),
	} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	o := access
	o.Files = []string{photo, notes}
	p := startChat(t, o, "What are these?")
	if err := p.wait(); err != nil || !strings.Contains(p.stdout.String(), "[image photo.png,") || !strings.Contains(p.stdout.String(), "notes.md") {
		t.Fatalf("with files: %v, stdout %q; want the echo of both files; stderr:\n%s", err, p.stdout, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "attached photo.png (image/png, ") || !strings.Contains(p.stderr.String(), "attached notes.md (") {
		t.Errorf("stderr does not say what was attached:\n%s", p.stderr)
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
		o := access
		o.Model, o.Files = "textonly", []string{f.path}
		p := startChat(t, o, "hi")
		err := p.wait()
		if err == nil || !strings.Contains(err.Error(), f.want) || p.stdout.String() != "" || strings.Contains(p.stderr.String(), "continue it with") {
			t.Errorf("%s: %v, stdout %q, stderr %q; want the error %q, no chat", f.name, err, p.stdout, p.stderr, f.want)
		}
	}

	o = access
	o.Model = "textonly"
	p = startChat(t, o)
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
	if err := p.wait(); err != nil {
		t.Errorf("the session ended with %v\nstderr:\n%s", err, p.stderr)
	}
	if strings.Contains(p.stdout.String(), "photo.png") || strings.Contains(p.stdout.String(), "archive.zip") {
		t.Errorf("a refused file reached the model:\n%s", p.stdout)
	}
}
