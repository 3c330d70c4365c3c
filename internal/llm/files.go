package llm

import (
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
)

// File is a file part of a user message as a provider sends it. The engine
// loads a stored file's bytes into the part (chat.Part.Data) before a call;
// the OpenAI facade's parts carry a URL instead: a data URL (its bytes) or
// an http(s) URL the provider fetches.
type File struct {
	Kind      string // chat.FileImage, chat.FilePDF or chat.FileText; "" when the part can only be named (Text)
	Name      string // the file's name ("" for a URL without one)
	MediaType string
	// RemoteURL is an http(s) URL of the file, for the provider to fetch;
	// "" when the bytes are here (Data).
	RemoteURL string
	Data      []byte
	// Text is what a model reads of a text file (its name and content), or
	// of a part that cannot be sent (its name, and why).
	Text string
}

// DataURL is the file's bytes as a base64 data URL: the form OpenAI's
// image_url, input_image and file inputs take.
func (f File) DataURL() string {
	return "data:" + f.MediaType + ";base64," + base64.StdEncoding.EncodeToString(f.Data)
}

// Base64 is the file's bytes in standard base64: Anthropic's base64
// sources.
func (f File) Base64() string { return base64.StdEncoding.EncodeToString(f.Data) }

// Filename is the name a provider's file input carries: the file's, else
// one made from its kind.
func (f File) Filename() string {
	if f.Name != "" {
		return f.Name
	}
	if f.Kind == chat.FilePDF {
		return "document.pdf"
	}
	return "file"
}

// FileOf resolves a file part (chat.PartFile) for a provider. A text file
// is its text, headed by its name ("File notes.md:\n..."); a part whose
// bytes are missing, or of a type no provider takes, is a note naming it.
func FileOf(p chat.Part) File {
	f := File{Name: p.Name, MediaType: p.MediaType, Data: p.Data}
	switch {
	case strings.HasPrefix(p.URL, "data:"):
		mt, data, err := ParseDataURL(p.URL)
		if err != nil {
			f.Text = fmt.Sprintf("[%s could not be read: %v]", chat.FileLabel(p), err)
			return f
		}
		f.MediaType, f.Data = mt, data
	case p.URL != "":
		f.RemoteURL = p.URL
		if f.MediaType == "" {
			f.Kind = chat.FileImage // an image_url of the OpenAI facade
			return f
		}
	case len(p.Data) == 0:
		f.Text = chat.FileUnavailable(p)
		return f
	}
	f.Kind = chat.FileKindOf(f.MediaType)
	switch f.Kind {
	case chat.FileText:
		f.Text = fmt.Sprintf("File %s:\n%s", f.Filename(), strings.ToValidUTF8(string(f.Data), "\uFFFD"))
	case "":
		f.Text = fmt.Sprintf("[%s of type %s cannot be sent to the model]", chat.FileLabel(p), f.MediaType)
	}
	return f
}

// ErrDataURL is the error of a data URL that is not a base64 one of a
// media type with data.
var ErrDataURL = errors.New("not a base64 data URL")

// ParseDataURL reads a base64 data URL ("data:image/png;base64,...") and
// returns its media type (without parameters, lower case) and bytes. A data
// URL that is not base64, has no media type, or whose data is not valid
// standard base64 or is empty, is an error wrapping ErrDataURL.
func ParseDataURL(s string) (mediaType string, data []byte, err error) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", nil, fmt.Errorf("%w: no data: prefix", ErrDataURL)
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil, fmt.Errorf("%w: no comma before the data", ErrDataURL)
	}
	head, ok := strings.CutSuffix(meta, ";base64")
	if !ok {
		return "", nil, fmt.Errorf("%w: the data is not marked ;base64", ErrDataURL)
	}
	mt, _, err := mime.ParseMediaType(head)
	if err != nil || head == "" {
		return "", nil, fmt.Errorf("%w: no valid media type", ErrDataURL)
	}
	data, err = base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", nil, fmt.Errorf("%w: invalid base64 data: %v", ErrDataURL, err)
	}
	if len(data) == 0 {
		return "", nil, fmt.Errorf("%w: empty data", ErrDataURL)
	}
	return mt, data, nil
}
