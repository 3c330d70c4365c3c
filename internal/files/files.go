// Package files receives uploaded files: it reads an upload once, into a
// temporary file, hashing it, counting it against the size limit, keeping
// its first bytes and checking whether all of them are text, and names its
// media type from those bytes rather than from what the client said. Nothing here holds a whole file
// in memory.
package files

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gabriel-vasile/mimetype"

	"github.com/parleyhq/parley/internal/chat"
)

// The media types parley accepts, as stored and served.
const (
	PNG      = "image/png"
	JPEG     = "image/jpeg"
	GIF      = "image/gif"
	WebP     = "image/webp"
	PDF      = "application/pdf"
	Text     = "text/plain"
	Markdown = "text/markdown"
	JSON     = "application/json"
	CSV      = "text/csv"
)

// MaxNameBytes bounds a file's name.
const MaxNameBytes = 255

// CheckName refuses, saying why, a file name that is too long, not UTF-8,
// or holds control characters or bidirectional formatting characters
// (U+202E and its kin), which would show a name other than the file's,
// like "invoice\u202Efdp.exe" shown as "invoiceexe.pdf".
func CheckName(name string) error {
	switch {
	case !utf8.ValidString(name):
		return errors.New("the file name must be valid UTF-8")
	case len(name) > MaxNameBytes:
		return fmt.Errorf("the file name is %d bytes, at most %d allowed", len(name), MaxNameBytes)
	case strings.ContainsFunc(name, unicode.IsControl):
		return errors.New("the file name must not hold control characters")
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) }):
		return errors.New("the file name must not hold bidirectional formatting characters (U+202A to U+202E, U+2066 to U+2069, U+200E, U+200F, U+061C)")
	}
	return nil
}

// IsImage reports whether files of the media type are images.
func IsImage(mediaType string) bool { return chat.FileKindOf(mediaType) == chat.FileImage }

// sniffBytes is how much of a file Detect looks at.
const sniffBytes = 4096

// UnsupportedError refuses a file whose bytes are of a type parley does not
// take.
type UnsupportedError struct {
	Detected string // what the bytes look like
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("the file's content is %s; accepted are PNG, JPEG, GIF and WebP images, PDF, and UTF-8 text (plain, Markdown, JSON, CSV)", e.Detected)
}

// TooLargeError refuses a file larger than the limit.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the file is larger than %d bytes (files.max_bytes)", e.Limit)
}

// ReadError is a failure to read the upload itself (the client's body
// broke off or was malformed), not to store it.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "read the upload: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// ErrEmpty refuses a file of no bytes.
var ErrEmpty = errors.New("the file is empty")

// Detect names the media type of a file from its first bytes (at least
// the first 4 KiB, or all of it) and its name: an accepted type, or an
// *UnsupportedError. The name only tells Markdown (.md, .markdown) and CSV
// (.csv) from plain text; it never makes other bytes acceptable.
func Detect(head []byte, name string) (string, error) {
	m := mimetype.Detect(head)
	mediaType, params, _ := strings.Cut(m.String(), ";")
	charset := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(params), "charset="))
	switch mediaType {
	case PNG, JPEG, GIF, WebP, PDF, JSON, CSV:
		return mediaType, nil
	case Text:
		if charset != "" && !strings.EqualFold(charset, "utf-8") {
			return "", &UnsupportedError{Detected: m.String() + " (text must be UTF-8)"}
		}
		switch strings.ToLower(path.Ext(name)) {
		case ".md", ".markdown":
			return Markdown, nil
		case ".csv":
			return CSV, nil
		}
		return Text, nil
	}
	return "", &UnsupportedError{Detected: m.String()}
}

// Upload is a file received into a temporary file. Close removes it.
type Upload struct {
	Size      int64
	SHA256    string // lower-case hex
	MediaType string
	tmp       *os.File
}

// Receive reads r to its end into a temporary file in dir ("": the
// system's), at most max bytes: one byte more is a *TooLargeError at once,
// the rest of r unread. It hashes the bytes and detects their media type
// (Detect, with name); an empty file is ErrEmpty. On error nothing is left
// behind.
func Receive(r io.Reader, name string, max int64, dir string) (_ *Upload, err error) {
	tmp, err := os.CreateTemp(dir, "parley-upload-*")
	if err != nil {
		return nil, fmt.Errorf("receive file: %w", err)
	}
	u := &Upload{tmp: tmp}
	defer func() {
		if err != nil {
			u.Close()
		}
	}()
	h := sha256.New()
	head := &headWriter{max: sniffBytes}
	text := &textCheck{}
	src := &errReader{r: io.LimitReader(r, max+1)}
	n, err := io.Copy(io.MultiWriter(tmp, h, head, text), src)
	if src.err != nil {
		return nil, &ReadError{Err: src.err}
	}
	if err != nil {
		return nil, fmt.Errorf("receive file: %w", err)
	}
	switch {
	case n > max:
		return nil, &TooLargeError{Limit: max}
	case n == 0:
		return nil, ErrEmpty
	}
	if u.MediaType, err = Detect(head.b, name); err != nil {
		return nil, err
	}
	if isText(u.MediaType) && !text.text() {
		return nil, &UnsupportedError{Detected: u.MediaType + " at its start, but not UTF-8 text throughout (binary bytes after its first 4 KiB)"}
	}
	u.Size, u.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	return u, nil
}

// Content returns a reader of the file's bytes from the start.
func (u *Upload) Content() (io.Reader, error) {
	if _, err := u.tmp.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewind upload: %w", err)
	}
	return u.tmp, nil
}

// Close removes the temporary file.
func (u *Upload) Close() error {
	if u == nil || u.tmp == nil {
		return nil
	}
	err := errors.Join(u.tmp.Close(), os.Remove(u.tmp.Name()))
	u.tmp = nil
	return err
}

// headWriter keeps the first max bytes written to it.
type headWriter struct {
	b   []byte
	max int
}

func (w *headWriter) Write(p []byte) (int, error) {
	if room := w.max - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// errReader remembers the error its reader failed with (other than EOF).
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}
