package facade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/files"
	"github.com/parleyhq/parley/internal/llm"
)

// maxFileParts bounds the images and files of one user message.
const maxFileParts = 20

// inPart is a content part of a Chat Completions user message: text, an
// image_url, or a file.
type inPart struct {
	Type     string      `json:"type"`
	Text     string      `json:"text,omitempty"`
	ImageURL *inImageURL `json:"image_url,omitempty"`
	File     *inFile     `json:"file,omitempty"`
}

// inImageURL is an image_url part's image.
type inImageURL struct {
	URL string `json:"url"`
}

// inFile is a file part's file.
type inFile struct {
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// userContent reads a user message's content: a string, or an array of
// text, image_url and file parts, in order. Text parts in a row join into
// one part; an image becomes a file part holding its URL (a data URL, or
// an http(s) URL the provider fetches: parley never does), a file one
// holding its data URL and name. size is the bytes of its text. Data URLs
// are checked here, so a provider never refuses them: base64, of a media
// type parley sends (images: PNG, JPEG, GIF, WebP; files: PDF, or text),
// and bytes that are of that type; and each must pass rules.
func userContent(raw json.RawMessage, param string, rules fileRules) (parts []chat.Part, size int, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		text, err := contentText(raw, param, false)
		return []chat.Part{chat.TextPart(text)}, len(text), err
	}
	var in []inPart
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, 0, invalid(param, "must be a string or an array of content parts")
	}
	files := 0
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			parts = append(parts, chat.TextPart(text.String()))
			text.Reset()
		}
	}
	for i, p := range in {
		pp := fmt.Sprintf("%s[%d]", param, i)
		var (
			f     chat.Part
			bytes int
		)
		switch p.Type {
		case "text":
			text.WriteString(p.Text)
			size += len(p.Text)
			continue
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, 0, invalid(pp+".image_url.url", "an image_url part needs its url")
			}
			if f, bytes, err = imagePart(p.ImageURL.URL, pp+".image_url.url"); err != nil {
				return nil, 0, err
			}
		case "file":
			if p.File == nil || p.File.FileID != "" || p.File.FileData == "" {
				return nil, 0, invalid(pp+".file", "a file part needs file_data, a base64 data URL (parley does not know OpenAI file ids)")
			}
			if f, bytes, err = filePart(p.File.FileData, p.File.Filename, pp+".file.file_data"); err != nil {
				return nil, 0, err
			}
		default:
			return nil, 0, invalid(pp+".type", "%q is not supported: a user message takes text, image_url and file parts", p.Type)
		}
		kind := chat.FileKindOf(f.MediaType)
		if f.MediaType == "" {
			kind = chat.FileImage // an image on the web
		}
		if err := rules.check(kind, bytes, pp); err != nil {
			return nil, 0, err
		}
		if files++; files > maxFileParts {
			return nil, 0, invalid(param, "holds more than %d images and files", maxFileParts)
		}
		flush()
		parts = append(parts, f)
	}
	flush()
	if files == 0 && strings.TrimSpace(joinTexts(parts)) == "" {
		return nil, 0, invalid(param, "must not be empty")
	}
	return parts, size, nil
}

// joinTexts joins the text of parts.
func joinTexts(parts []chat.Part) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// imagePart is an image given by URL, with its size (0 on the web): an
// http(s) URL as it is, or a checked data URL.
func imagePart(url, param string) (chat.Part, int, error) {
	if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
		if strings.ContainsAny(url, " \t\r\n") {
			return chat.Part{}, 0, invalid(param, "is not a valid URL")
		}
		return chat.Part{Type: chat.PartFile, URL: url}, 0, nil
	}
	mt, size, err := checkDataURL(url, param, chat.FileImage)
	if err != nil {
		return chat.Part{}, 0, err
	}
	return chat.Part{Type: chat.PartFile, URL: url, MediaType: mt}, size, nil
}

// filePart is a file given as a data URL, with its size: a PDF, or a text
// file.
func filePart(dataURL, name, param string) (chat.Part, int, error) {
	mt, size, err := checkDataURL(dataURL, param, chat.FilePDF, chat.FileText)
	if err != nil {
		return chat.Part{}, 0, err
	}
	if err := files.CheckName(name); err != nil {
		return chat.Part{}, 0, invalid(strings.TrimSuffix(param, ".file_data")+".filename", "%v", err)
	}
	return chat.Part{Type: chat.PartFile, URL: dataURL, MediaType: mt, Name: name}, size, nil
}

// checkDataURL checks a base64 data URL of one of kinds (chat.FileKindOf)
// whose bytes are of its media type, and returns that type and the size
// of the bytes.
func checkDataURL(url, param string, kinds ...string) (string, int, error) {
	want := map[string]string{
		chat.FileImage: "an image (PNG, JPEG, GIF or WebP)",
		chat.FilePDF:   "a PDF",
		chat.FileText:  "a text file (plain text, Markdown, JSON or CSV)",
	}
	var wanted []string
	for _, k := range kinds {
		wanted = append(wanted, want[k])
	}
	expected := strings.Join(wanted, " or ")
	mt, data, err := llm.ParseDataURL(url)
	if err != nil {
		return "", 0, invalid(param, "must be an http(s) URL or a base64 data URL of %s, like data:image/png;base64,...: %v", expected, err)
	}
	kind := chat.FileKindOf(mt)
	if !slices.Contains(kinds, kind) {
		return "", 0, invalid(param, "is of media type %s: parley takes %s here", mt, expected)
	}
	sniffed, _, _ := strings.Cut(http.DetectContentType(data), ";")
	ok := sniffed == mt
	if kind == chat.FileText {
		ok = utf8.Valid(data) && !bytes.ContainsRune(data, 0)
	}
	if !ok {
		return "", 0, invalid(param, "says %s, but its bytes are not %s data", mt, mt)
	}
	return mt, len(data), nil
}

// fileRules are what a request's images and files are held to.
type fileRules struct {
	model    string
	takes    func(kind string) bool // the kinds of input the model takes; nil: every kind
	maxBytes int64                  // the size of one file (files.max_bytes); 0: no limit
}

// fileRules are the rules of a request to model: its entry's inputs, and
// files.max_bytes.
func (f *Facade) fileRules(model string) fileRules {
	r := fileRules{model: model, maxBytes: f.cfg.Files.MaxBytes}
	if m, ok := f.cfg.FindModel(model); ok {
		r.takes = m.TakesInput
	}
	return r
}

// check refuses, naming its part (param), a file of kind and size the
// rules do not let through.
func (r fileRules) check(kind string, size int, param string) error {
	if r.maxBytes > 0 && int64(size) > r.maxBytes {
		return invalid(param, "is a file of %d bytes, at most %d allowed (files.max_bytes)", size, r.maxBytes)
	}
	if r.takes != nil && !r.takes(kind) {
		return &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "unsupported_input", Param: &param,
			Message: fmt.Sprintf("model %q does not take %s input (its model entry's inputs say what it takes)", r.model, kind)}
	}
	return nil
}

// filePartAt is the index of the first input_image or input_file part of a
// Responses message's content, -1 if none.
func filePartAt(content json.RawMessage) int {
	var parts []struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(content, &parts) // a string: no parts
	for j, p := range parts {
		if p.Type == "input_image" || p.Type == "input_file" {
			return j
		}
	}
	return -1
}
