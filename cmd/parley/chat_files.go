package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/parleyhq/parley/client"
)

// fileKinds names the kinds of files a server takes, for its 415.
const fileKinds = "images (PNG, JPEG, GIF, WebP), PDF, text, Markdown, JSON, CSV"

// attach uploads the file at path and keeps it for the next message sent
// (--file, /attach); it says on stderr what was attached.
func (s *chatSession) attach(ctx context.Context, path string) error {
	f, err := uploadFile(ctx, s.c, path)
	if err != nil {
		return err
	}
	s.files = append(s.files, f)
	fmt.Fprintf(s.info, "attached %s (%s, %s)\n", f.Name, f.MediaType, sizeText(f.Size))
	return nil
}

// attachCommand is "/attach PATH": the file goes with the next message.
func (s *chatSession) attachCommand(ctx context.Context, path string) error {
	if path == "" {
		return &commandError{"give the file to attach: /attach PATH"}
	}
	if err := s.attach(ctx, path); err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized {
			return err
		}
		return &commandError{err.Error()}
	}
	return nil
}

// uploadFile uploads the regular file at path under its base name; the
// errors say in words what is wrong with the file.
func uploadFile(ctx context.Context, c *client.Client, path string) (client.File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return client.File{}, fmt.Errorf("cannot attach %s: %w", path, errors.Unwrap(err))
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && !st.Mode().IsRegular() {
		return client.File{}, fmt.Errorf("cannot attach %s: not a regular file", path)
	}
	f, err := c.UploadFile(ctx, filepath.Base(path), fh)
	if err != nil {
		return client.File{}, uploadError(path, err)
	}
	return f, nil
}

// uploadError says why the server refused the upload of path, in words.
func uploadError(path string, err error) error {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		return fmt.Errorf("cannot attach %s: %w", path, err)
	}
	switch ae.StatusCode {
	case http.StatusRequestEntityTooLarge:
		if limit, ok := ae.Details["limit"].(float64); ok {
			return fmt.Errorf("cannot attach %s: it is larger than the server's limit of %s", path, sizeText(int64(limit)))
		}
		return fmt.Errorf("cannot attach %s: it is larger than the server's limit", path)
	case http.StatusUnsupportedMediaType:
		return fmt.Errorf("cannot attach %s: this kind of file can't be attached (%s can)", path, fileKinds)
	case http.StatusUnauthorized:
		return err
	}
	return fmt.Errorf("cannot attach %s: %s", path, ae.Message)
}

// content is a message's content: the text alone, or its text and the
// attached files' parts.
func content(text string, files []client.File) any {
	if len(files) == 0 {
		return text
	}
	var parts []client.Part
	if text != "" {
		parts = append(parts, client.TextPart(text))
	}
	for _, f := range files {
		parts = append(parts, client.FilePart(f.ID))
	}
	return parts
}

// sizeText writes a size for reading: 812 bytes, 14.2 KB, 20 MB.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return trimZero(float64(n)/(1<<20)) + " MB"
	case n >= 1<<10:
		return trimZero(float64(n)/(1<<10)) + " KB"
	}
	return fmt.Sprintf("%d bytes", n)
}

func trimZero(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

// refusedFiles reports whether err is the server's refusal (a 400) of a
// message with attached files, like a PDF for a model that takes no PDFs.
// It says so, and drops the files: the message was not sent.
func (s *chatSession) refusedFiles(err error) bool {
	var ae *client.APIError
	if len(s.files) == 0 || !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		return false
	}
	s.files = nil
	fmt.Fprintf(s.info, "the message was not sent: %s\n(the attached files are dropped: /attach the ones the model takes, and send the message again)\n", ae.Message)
	return true
}
