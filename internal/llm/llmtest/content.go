package llmtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The fakes check the images and files a request carries the way the real
// APIs do, and refuse a malformed one with the API's HTTP 400 and error
// body: an image must be an http(s) URL or a base64 data URL (on
// Anthropic, a base64 source with its media type, or a URL source) of PNG,
// JPEG, GIF or WebP whose bytes are an image of that kind; a PDF a base64
// data URL (a base64 source on Anthropic) of application/pdf whose bytes
// are a PDF, with a filename on OpenAI; and a part of a type the API does
// not know is refused. The OpenAI fakes take PDFs as their only files, as
// parley sends no other kind (the Responses API takes more).

// imageTypes are the media types the APIs take images in.
var imageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// dataURL splits a data URL into its media type, whether it says base64,
// and its data; ok is false without the "data:" prefix or the comma.
func dataURL(s string) (mediaType string, base64Marked bool, data string, ok bool) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", false, "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", false, "", false
	}
	meta, base64Marked = strings.CutSuffix(meta, ";base64")
	mediaType, _, _ = strings.Cut(meta, ";")
	return strings.ToLower(mediaType), base64Marked, data, true
}

// sniffed is the media type the bytes are, as a server would tell.
func sniffed(data []byte) string {
	mt, _, _ := strings.Cut(http.DetectContentType(data), ";")
	return mt
}

// openaiDataURLError is why OpenAI would refuse url as a data URL of one
// of types (the kind of data, "an image", "an application/pdf"), in its
// words after "but got", or "".
func openaiDataURLError(url string, types []string) string {
	mt, b64, data, ok := dataURL(url)
	switch {
	case !ok:
		return "a value without the 'data:' prefix"
	case !b64:
		return "a value that is not base64-encoded"
	case !slices.Contains(types, mt):
		return fmt.Sprintf("unsupported MIME type '%s'", mt)
	case data == "":
		return "empty base64-encoded bytes"
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return "invalid base64-encoded bytes"
	}
	if sniffed(raw) != mt {
		return fmt.Sprintf("bytes that are not %s data", mt)
	}
	return ""
}

// openaiImageError checks an image URL of OpenAI's: an http(s) URL, or a
// data URL of an image. at names the field in the API's message.
func openaiImageError(url, param, at string) *historyError {
	if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
		return nil
	}
	if got := openaiDataURLError(url, imageTypes); got != "" {
		return &historyError{message: fmt.Sprintf("%s. Expected a base64-encoded data URL with an image MIME type "+
			"(e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got %s.", at, got), param: param}
	}
	return nil
}

// openaiFileError checks a file input of OpenAI's: file_data a data URL of
// a PDF, with a filename.
func openaiFileError(fileData, filename *string, param string) *historyError {
	if fileData == nil {
		return &historyError{message: fmt.Sprintf("Missing required parameter: '%s.file_data'.", param), param: param + ".file_data"}
	}
	if got := openaiDataURLError(*fileData, []string{"application/pdf"}); got != "" {
		return &historyError{message: fmt.Sprintf("Invalid file data: '%s.file_data'. Expected a base64-encoded data URL with an "+
			"application/pdf MIME type (e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ=='), but got %s.", param, got), param: param + ".file_data"}
	}
	if filename == nil || *filename == "" {
		return &historyError{message: fmt.Sprintf("Missing required parameter: '%s.filename'.", param), param: param + ".filename"}
	}
	return nil
}

// unsupportedPart is OpenAI's answer to a content part of an unknown type.
func unsupportedPart(typ, param string, supported string) *historyError {
	return &historyError{message: fmt.Sprintf("Invalid value: '%s'. Supported values are: %s.", typ, supported), param: param}
}

// chatContentError checks the content parts of a Chat Completions
// request's user messages.
func chatContentError(req openaiRequest) *historyError {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(req.field("messages"), &msgs) != nil {
		return nil
	}
	for i, m := range msgs {
		var parts []struct {
			Type     string          `json:"type"`
			ImageURL json.RawMessage `json:"image_url"`
			File     *struct {
				FileData *string `json:"file_data"`
				Filename *string `json:"filename"`
			} `json:"file"`
		}
		if m.Role != "user" || json.Unmarshal(m.Content, &parts) != nil {
			continue // a string, or not a user message's parts
		}
		for j, p := range parts {
			param := fmt.Sprintf("messages[%d].content[%d]", i, j)
			switch p.Type {
			case "text", "input_audio":
			case "image_url":
				var image struct {
					URL string `json:"url"`
				}
				if json.Unmarshal(p.ImageURL, &image) != nil || image.URL == "" {
					return &historyError{message: fmt.Sprintf("Missing required parameter: '%s.image_url.url'.", param), param: param + ".image_url.url"}
				}
				if e := openaiImageError(image.URL, param+".image_url.url", fmt.Sprintf("Invalid image URL: '%s.image_url.url'", param)); e != nil {
					return e
				}
			case "file":
				if p.File == nil {
					return &historyError{message: fmt.Sprintf("Missing required parameter: '%s.file'.", param), param: param + ".file"}
				}
				if e := openaiFileError(p.File.FileData, p.File.Filename, param+".file"); e != nil {
					return e
				}
			default:
				return unsupportedPart(p.Type, param+".type", "'text', 'image_url', 'input_audio', 'refusal', 'audio', and 'file'")
			}
		}
	}
	return nil
}

// responsesContentError checks the content of a Responses request's input
// messages.
func responsesContentError(req openaiRequest) *historyError {
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(req.field("input"), &items) != nil {
		return nil
	}
	for i, it := range items {
		var parts []struct {
			Type     string          `json:"type"`
			ImageURL json.RawMessage `json:"image_url"`
			FileID   *string         `json:"file_id"`
			FileData *string         `json:"file_data"`
			Filename *string         `json:"filename"`
		}
		if (it.Type != "" && it.Type != "message") || json.Unmarshal(it.Content, &parts) != nil {
			continue
		}
		for j, p := range parts {
			param := fmt.Sprintf("input[%d].content[%d]", i, j)
			switch p.Type {
			case "input_text", "output_text", "refusal", "summary_text":
			case "input_image":
				var url *string
				if len(p.ImageURL) > 0 && json.Unmarshal(p.ImageURL, &url) != nil {
					return &historyError{message: fmt.Sprintf("Invalid type for '%s.image_url': expected a string, but got an object instead.", param), param: param + ".image_url"}
				}
				if url == nil && p.FileID == nil {
					return &historyError{message: fmt.Sprintf("Invalid '%s': an input_image needs an image_url or a file_id.", param), param: param}
				}
				if url != nil {
					if e := openaiImageError(*url, param+".image_url", fmt.Sprintf("Invalid '%s.image_url'", param)); e != nil {
						return e
					}
				}
			case "input_file":
				if e := openaiFileError(p.FileData, p.Filename, param); e != nil {
					return e
				}
			default:
				return unsupportedPart(p.Type, param+".type",
					"'input_text', 'input_image', 'output_text', 'refusal', 'input_file', 'computer_screenshot', and 'summary_text'")
			}
		}
	}
	return nil
}

// anthropicSource is an image or document block's source.
type anthropicSource struct {
	Type      string  `json:"type"`
	MediaType *string `json:"media_type"`
	Data      *string `json:"data"`
	URL       *string `json:"url"`
}

// anthropicContentError checks the image and document blocks of a Messages
// request, with the API's messages (the field's path, then why).
func anthropicContentError(body []byte) *historyError {
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	for i, m := range req.Messages {
		var blocks []struct {
			Type   string           `json:"type"`
			Source *anthropicSource `json:"source"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for j, b := range blocks {
			at := fmt.Sprintf("messages.%d.content.%d.%s.source", i, j, b.Type)
			var why string
			switch b.Type {
			case "image":
				why = anthropicSourceError(b.Source, at, imageTypes, "Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'")
			case "document":
				why = anthropicSourceError(b.Source, at, []string{"application/pdf"}, "Input should be 'application/pdf'")
			}
			if why != "" {
				return &historyError{message: why}
			}
		}
	}
	return nil
}

// anthropicSourceError is why the API would refuse a source of a block
// whose base64 data must be of one of types ("" if it would not).
func anthropicSourceError(s *anthropicSource, at string, types []string, shouldBe string) string {
	if s == nil {
		return strings.TrimSuffix(at, ".source") + ".source: Field required"
	}
	switch s.Type {
	case "url":
		if s.URL == nil || !(strings.HasPrefix(*s.URL, "https://") || strings.HasPrefix(*s.URL, "http://")) {
			return at + ".url.url: Field required"
		}
		return ""
	case "text":
		if types[0] == "application/pdf" && s.Data != nil { // a plain-text document
			return ""
		}
	case "base64":
	default:
		return fmt.Sprintf("%s: Input tag '%s' found using 'type' does not match any of the expected tags", at, s.Type)
	}
	at += ".base64"
	switch {
	case s.MediaType == nil:
		return at + ".media_type: Field required"
	case !slices.Contains(types, *s.MediaType):
		return at + ".media_type: " + shouldBe
	case s.Data == nil:
		return at + ".data: Field required"
	}
	raw, err := base64.StdEncoding.DecodeString(*s.Data)
	switch {
	case err != nil || len(raw) == 0:
		return at + ".data: Invalid base64 data"
	case *s.MediaType == "application/pdf" && sniffed(raw) != "application/pdf":
		return at + ".data: The PDF specified was not valid."
	case sniffed(raw) != *s.MediaType:
		return fmt.Sprintf("%s.data: Image does not match the provided media type %s", at, *s.MediaType)
	}
	return ""
}
