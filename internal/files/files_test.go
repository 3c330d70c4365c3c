package files

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

var pngHead = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00")

func TestDetect(t *testing.T) {
	elf, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, name string
		head       []byte
		want       string // "" : refused
	}{
		{"PNG declared as text", "notes.txt", pngHead, PNG},
		{"JPEG", "a.jpg", []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), JPEG},
		{"GIF", "a.gif", []byte("GIF89a\x01\x00\x01\x00"), GIF},
		{"WebP", "a.webp", []byte("RIFF\x24\x00\x00\x00WEBPVP8 "), WebP},
		{"PDF", "paper", []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), PDF},
		{"plain text", "a.txt", []byte("hello world\n"), Text},
		{"Markdown by its name", "README.md", []byte("# Title\n\nsome *text*\n"), Markdown},
		{"JSON", "data.bin", []byte(`{"a": [1, 2]}`), JSON},
		{"CSV", "t.txt", []byte("a,b,c\n1,2,3\n4,5,6\n"), CSV},
		{"HTML declared as an image", "cat.png", []byte("<!DOCTYPE html><html><script>alert(1)</script></html>"), ""},
		{"SVG", "a.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script/></svg>`), ""},
		{"an executable", "a.txt", elf[:4096], ""},
		{"Latin-1 text", "a.txt", []byte("caf\xe9 au lait\n"), ""},
		{"PNG named .md", "x.md", pngHead, PNG},
	} {
		got, err := Detect(c.head, c.name)
		if c.want == "" {
			var ue *UnsupportedError
			if !errors.As(err, &ue) {
				t.Errorf("%s: Detect = %q, %v; want an *UnsupportedError", c.what, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: Detect = %q, %v; want %q", c.what, got, err, c.want)
		}
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestReceive(t *testing.T) {
	dir := t.TempDir()
	content := append(append([]byte{}, pngHead...), bytes.Repeat([]byte{7}, 100_000)...)
	u, err := Receive(bytes.NewReader(content), "a.png", int64(len(content)), dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	if u.Size != int64(len(content)) || u.SHA256 != hex.EncodeToString(sum[:]) || u.MediaType != PNG {
		t.Fatalf("Receive = %+v", u)
	}
	r, err := u.Content()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(r); !bytes.Equal(got, content) {
		t.Fatalf("Content gave %d bytes, want %d", len(got), len(content))
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("Close left %v", left)
	}
}

func TestReceiveRefuses(t *testing.T) {
	dir := t.TempDir()
	const max = 1000
	huge := &countingReader{r: io.MultiReader(bytes.NewReader(pngHead), strings.NewReader(strings.Repeat("x", 10*max)))}
	_, err := Receive(huge, "a.png", max, dir)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != max {
		t.Fatalf("Receive of too much = %v, want a *TooLargeError", err)
	}
	if huge.n > max+1 {
		t.Errorf("Receive read %d bytes of a too large file, want at most %d", huge.n, max+1)
	}
	if _, err := Receive(strings.NewReader(""), "a.txt", max, dir); !errors.Is(err, ErrEmpty) {
		t.Errorf("Receive of nothing = %v, want ErrEmpty", err)
	}
	var ue *UnsupportedError
	if _, err := Receive(strings.NewReader("<html><body>hi</body></html>"), "a.png", max, dir); !errors.As(err, &ue) {
		t.Errorf("Receive of HTML = %v, want an *UnsupportedError", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("refused uploads left %v", left)
	}
}

// TestReceiveTextThroughout checks that a file that begins as text is
// stored as text only if all of it is: a ZIP behind 4 KiB of text, Latin-1
// past the first 4 KiB, or a NUL at its end are refused, while UTF-8 read a
// byte at a time (every rune split across writes) or in large reads is
// text.
func TestReceiveTextThroughout(t *testing.T) {
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	fw, err := zw.Create("payload.exe")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(bytes.Repeat([]byte("MZ\x90\x00"), 100))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	page := strings.Repeat("plain words, nothing else.\n", 200) // > 4 KiB
	utf := strings.Repeat("héllo wörld — ✓ 🙂\n", 600)
	for _, c := range []struct {
		what, name, content string
		want                string // "": refused
	}{
		{"a ZIP behind a page of text", "notes.txt", page + zipped.String(), ""},
		{"Latin-1 past the first 4 KiB", "notes.txt", page + "caf\xe9\n", ""},
		{"a NUL at the end", "notes.md", page + "\x00", ""},
		{"a rune cut at the end", "notes.txt", page + "\xe2\x9c", ""},
		{"CSV with a binary byte late", "t.csv", "a,b\n" + strings.Repeat("1,2\n", 2000) + "\x01,2\n", ""},
		{"UTF-8 text", "notes.txt", utf, Text},
		{"Markdown with tabs, CR LF, form feed and escape", "a.md", "# T\r\n\tx\f\x1b[1m\n" + utf, Markdown},
	} {
		for _, r := range []io.Reader{strings.NewReader(c.content), iotest.OneByteReader(strings.NewReader(c.content))} {
			u, err := Receive(r, c.name, 1<<20, t.TempDir())
			if c.want == "" {
				var ue *UnsupportedError
				if !errors.As(err, &ue) {
					t.Fatalf("%s: Receive = %+v, %v; want an *UnsupportedError", c.what, u, err)
				}
				continue
			}
			if err != nil || u.MediaType != c.want {
				t.Fatalf("%s: Receive = %+v, %v; want %s", c.what, u, err, c.want)
			}
			u.Close()
		}
	}
}
