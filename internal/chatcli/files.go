package chatcli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

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
// message with attached files, like an image for a model that takes none.
// It says so, and drops the files: the message was not sent.
func (s *chatSession) refusedFiles(err error) bool {
	var ae *client.APIError
	if len(s.files) == 0 || !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest {
		return false
	}
	fmt.Fprintf(s.info, "the message was not sent: %s\n(the attached files are dropped: /attach the ones the model takes, and send the message again)\n", refusal(ae, s.files))
	s.files = nil
	return true
}

// inputNames are the kinds of a model's inputs as a person names them.
var inputNames = map[string]string{"text": "text", "image": "images", "pdf": "PDFs"}

// refusal says why the server refused a message for one of files: the
// file by its name, the model and what it takes; other errors as the
// server worded them.
func refusal(ae *client.APIError, files []client.File) string {
	model, _ := ae.Details["model"].(string)
	kind, _ := ae.Details["kind"].(string)
	id, _ := ae.Details["file_id"].(string)
	if ae.Code != "unsupported_input" || model == "" || kind == "" {
		return ae.Message
	}
	name := id
	for _, f := range files {
		if f.ID == id {
			name = f.Name
		}
	}
	var takes []string
	inputs, _ := ae.Details["inputs"].([]any)
	for _, in := range inputs {
		if k, ok := in.(string); ok {
			takes = append(takes, first(inputNames[k], k))
		}
	}
	msg := fmt.Sprintf("%s: the model %s does not take %s", name, model, first(inputNames[kind], kind))
	if len(takes) > 0 {
		msg += " (it takes " + strings.Join(takes, ", ") + ")"
	}
	return msg
}

// refusalError is the server's refusal of a message's file, in words; it
// unwraps to the *client.APIError.
type refusalError struct {
	msg string
	err error
}

func (e *refusalError) Error() string { return e.msg }
func (e *refusalError) Unwrap() error { return e.err }

// worded gives the refusal of one of the attached files in words (see
// refusal); other errors are returned as they are.
func (s *chatSession) worded(err error) error {
	var ae *client.APIError
	if len(s.files) == 0 || !errors.As(err, &ae) || ae.Code != "unsupported_input" {
		return err
	}
	return &refusalError{msg: refusal(ae, s.files), err: err}
}
