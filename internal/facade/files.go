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
// and bytes that are of that type.
func userContent(raw json.RawMessage, param string) (parts []chat.Part, size int, err error) {
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
		var f chat.Part
		switch p.Type {
		case "text":
			text.WriteString(p.Text)
			size += len(p.Text)
			continue
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, 0, invalid(pp+".image_url.url", "an image_url part needs its url")
			}
			if f, err = imagePart(p.ImageURL.URL, pp+".image_url.url"); err != nil {
				return nil, 0, err
			}
		case "file":
			if p.File == nil || p.File.FileID != "" || p.File.FileData == "" {
				return nil, 0, invalid(pp+".file", "a file part needs file_data, a base64 data URL (parley does not know OpenAI file ids)")
			}
			if f, err = filePart(p.File.FileData, p.File.Filename, pp+".file.file_data"); err != nil {
				return nil, 0, err
			}
		default:
			return nil, 0, invalid(pp+".type", "%q is not supported: a user message takes text, image_url and file parts", p.Type)
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

// imagePart is an image given by URL: an http(s) URL as it is, or a
// checked data URL.
func imagePart(url, param string) (chat.Part, error) {
	if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
		if strings.ContainsAny(url, " \t\r\n") {
			return chat.Part{}, invalid(param, "is not a valid URL")
		}
		return chat.Part{Type: chat.PartFile, URL: url}, nil
	}
	mt, err := checkDataURL(url, param, chat.FileImage)
	if err != nil {
		return chat.Part{}, err
	}
	return chat.Part{Type: chat.PartFile, URL: url, MediaType: mt}, nil
}

// filePart is a file given as a data URL: a PDF, or a text file.
func filePart(dataURL, name, param string) (chat.Part, error) {
	mt, err := checkDataURL(dataURL, param, chat.FilePDF, chat.FileText)
	if err != nil {
		return chat.Part{}, err
	}
	if !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' }) || len(name) > 255 {
		return chat.Part{}, invalid(strings.TrimSuffix(param, ".file_data")+".filename", "must be valid UTF-8 of at most 255 bytes, without control characters")
	}
	return chat.Part{Type: chat.PartFile, URL: dataURL, MediaType: mt, Name: name}, nil
}

// checkDataURL checks a base64 data URL of one of kinds (chat.FileKindOf)
// whose bytes are of its media type, and returns that type.
func checkDataURL(url, param string, kinds ...string) (string, error) {
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
		return "", invalid(param, "must be an http(s) URL or a base64 data URL of %s, like data:image/png;base64,...: %v", expected, err)
	}
	kind := chat.FileKindOf(mt)
	if !slices.Contains(kinds, kind) {
		return "", invalid(param, "is of media type %s: parley takes %s here", mt, expected)
	}
	sniffed, _, _ := strings.Cut(http.DetectContentType(data), ";")
	ok := sniffed == mt
	if kind == chat.FileText {
		ok = utf8.Valid(data) && !bytes.ContainsRune(data, 0)
	}
	if !ok {
		return "", invalid(param, "says %s, but its bytes are not %s data", mt, mt)
	}
	return mt, nil
}

// checkTaken refuses, naming its content part, an image or file of parts
// (a user message's, read from content) that the model cannot take.
func checkTaken(parts []chat.Part, content json.RawMessage, param, model string, takes func(kind string) bool) error {
	if takes == nil {
		return nil
	}
	var raw []json.RawMessage
	_ = json.Unmarshal(content, &raw) // parts with files came from an array
	var files []int                   // the content index of each file
	for j, r := range raw {
		var p inPart
		if json.Unmarshal(r, &p) == nil && p.Type != "text" {
			files = append(files, j)
		}
	}
	n := 0
	for _, p := range parts {
		if p.Type != chat.PartFile {
			continue
		}
		kind := chat.FileKindOf(p.MediaType)
		if p.MediaType == "" {
			kind = chat.FileImage // an image on the web
		}
		at := param
		if n < len(files) {
			at = fmt.Sprintf("%s[%d]", param, files[n])
		}
		n++
		if !takes(kind) {
			return &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "unsupported_input", Param: &at,
				Message: fmt.Sprintf("model %q does not take %s input (its model entry's inputs say what it takes)", model, kind)}
		}
	}
	return nil
}

// takes says which kinds of input model takes (its entry's inputs); nil
// for a model not configured, which the request's check refused already.
func (f *Facade) takes(model string) func(kind string) bool {
	m, ok := f.cfg.FindModel(model)
	if !ok {
		return nil
	}
	return m.TakesInput
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
