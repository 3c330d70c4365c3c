package llmtest

import (
	"encoding/base64"
	"strings"
	"testing"
)

// These tests pin down which images and files each fake refuses, on raw
// JSON; the providers' tests send them through the official SDKs.

var (
	pngB64    = base64.StdEncoding.EncodeToString(PNG)
	pdfB64    = base64.StdEncoding.EncodeToString(PDF)
	pngURL    = "data:image/png;base64," + pngB64
	pdfURL    = "data:application/pdf;base64," + pdfB64
	textB64   = base64.StdEncoding.EncodeToString([]byte("just text"))
	expectImg = "Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got "
	expectPDF = "Expected a base64-encoded data URL with an application/pdf MIME type (e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ=='), but got "
)

func TestChatContentRules(t *testing.T) {
	user := func(parts ...string) string {
		return `{"role":"user","content":[{"type":"text","text":"look"},` + strings.Join(parts, ",") + `]}`
	}
	image := func(url string) string { return `{"type":"image_url","image_url":{"url":"` + url + `"}}` }
	file := func(data, name string) string {
		return `{"type":"file","file":{"file_data":"` + data + `","filename":"` + name + `"}}`
	}
	const at = "messages[0].content[1]"
	cases := []historyCase{
		{"a data URL image", user(image(pngURL)), "", ""},
		{"a web image", user(image("https://example.com/cat.png")), "", ""},
		{"a PDF", user(file(pdfURL, "a.pdf")), "", ""},
		{"a text-only message", `{"role":"user","content":"hi"}`, "", ""},
		{"no data: prefix", user(image(pngB64)), "Invalid image URL: '" + at + ".image_url.url'. " + expectImg + "a value without the 'data:' prefix.", at + ".image_url.url"},
		{"bad base64", user(image("data:image/png;base64,%%%")), "Invalid image URL: '" + at + ".image_url.url'. " + expectImg + "invalid base64-encoded bytes.", at + ".image_url.url"},
		{"an unsupported type", user(image("data:image/bmp;base64," + pngB64)), "Invalid image URL: '" + at + ".image_url.url'. " + expectImg + "unsupported MIME type 'image/bmp'.", at + ".image_url.url"},
		{"empty data", user(image("data:image/png;base64,")), "Invalid image URL: '" + at + ".image_url.url'. " + expectImg + "empty base64-encoded bytes.", at + ".image_url.url"},
		{"bytes of another type", user(image("data:image/jpeg;base64," + pngB64)), "Invalid image URL: '" + at + ".image_url.url'. " + expectImg + "bytes that are not image/jpeg data.", at + ".image_url.url"},
		{"a file that is not a PDF", user(file("data:text/plain;base64,"+textB64, "a.txt")), "Invalid file data: '" + at + ".file.file_data'. " + expectPDF + "unsupported MIME type 'text/plain'.", at + ".file.file_data"},
		{"a file without a name", user(`{"type":"file","file":{"file_data":"` + pdfURL + `"}}`), "Missing required parameter: '" + at + ".file.filename'.", at + ".file.filename"},
		{"a Responses part", user(`{"type":"input_image","image_url":"` + pngURL + `"}`),
			"Invalid value: 'input_image'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal', 'audio', and 'file'.", at + ".type"},
	}
	checkHistory(t, cases,
		func(h string) string { return `{"model":"m","stream":true,"messages":[` + h + `]}` },
		func(b []byte) *historyError { return chatContentError(parseOpenAI(t, b)) })
}

func TestResponsesContentRules(t *testing.T) {
	user := func(parts ...string) string {
		return `{"role":"user","content":[{"type":"input_text","text":"look"},` + strings.Join(parts, ",") + `]}`
	}
	image := func(url string) string { return `{"type":"input_image","detail":"auto","image_url":"` + url + `"}` }
	const at = "input[0].content[1]"
	cases := []historyCase{
		{"a data URL image", user(image(pngURL)), "", ""},
		{"a web image", user(image("https://example.com/cat.png")), "", ""},
		{"a PDF", user(`{"type":"input_file","file_data":"` + pdfURL + `","filename":"a.pdf"}`), "", ""},
		{"bad base64", user(image("data:image/png;base64,@@")), "Invalid '" + at + ".image_url'. " + expectImg + "invalid base64-encoded bytes.", at + ".image_url"},
		{"an unsupported type", user(image("data:application/pdf;base64," + pdfB64)), "Invalid '" + at + ".image_url'. " + expectImg + "unsupported MIME type 'application/pdf'.", at + ".image_url"},
		{"a file that is not a PDF", user(`{"type":"input_file","file_data":"data:image/png;base64,` + pngB64 + `","filename":"a.png"}`),
			"Invalid file data: '" + at + ".file_data'. " + expectPDF + "unsupported MIME type 'image/png'.", at + ".file_data"},
		{"a Chat Completions part", user(`{"type":"image_url","image_url":{"url":"` + pngURL + `"}}`),
			"Invalid value: 'image_url'. Supported values are: 'input_text', 'input_image', 'output_text', 'refusal', 'input_file', 'computer_screenshot', and 'summary_text'.", at + ".type"},
	}
	checkHistory(t, cases,
		func(h string) string { return `{"model":"m","stream":true,"input":[` + h + `]}` },
		func(b []byte) *historyError { return responsesContentError(parseOpenAI(t, b)) })
}

func TestAnthropicContentRules(t *testing.T) {
	user := func(block string) string {
		return `{"role":"user","content":[{"type":"text","text":"look"},` + block + `]}`
	}
	image := func(source string) string { return `{"type":"image","source":` + source + `}` }
	doc := func(source string) string { return `{"type":"document","source":` + source + `}` }
	const img, pdf = "messages.0.content.1.image.source.base64", "messages.0.content.1.document.source.base64"
	cases := []historyCase{
		{"a base64 image", user(image(`{"type":"base64","media_type":"image/png","data":"` + pngB64 + `"}`)), "", ""},
		{"a URL image", user(image(`{"type":"url","url":"https://example.com/cat.png"}`)), "", ""},
		{"a PDF", user(doc(`{"type":"base64","media_type":"application/pdf","data":"` + pdfB64 + `"}`)), "", ""},
		{"no media type", user(image(`{"type":"base64","data":"` + pngB64 + `"}`)), img + ".media_type: Field required", ""},
		{"an unsupported media type", user(image(`{"type":"base64","media_type":"image/bmp","data":"` + pngB64 + `"}`)),
			img + ".media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", ""},
		{"bytes of another type", user(image(`{"type":"base64","media_type":"image/gif","data":"` + pngB64 + `"}`)),
			img + ".data: Image does not match the provided media type image/gif", ""},
		{"bad base64", user(image(`{"type":"base64","media_type":"image/png","data":"***"}`)), img + ".data: Invalid base64 data", ""},
		{"a document that is not a PDF", user(doc(`{"type":"base64","media_type":"text/plain","data":"` + textB64 + `"}`)),
			pdf + ".media_type: Input should be 'application/pdf'", ""},
		{"a PDF that is not one", user(doc(`{"type":"base64","media_type":"application/pdf","data":"` + textB64 + `"}`)),
			pdf + ".data: The PDF specified was not valid.", ""},
	}
	checkHistory(t, cases,
		func(h string) string { return `{"model":"m","max_tokens":10,"messages":[` + h + `]}` },
		anthropicContentError)
}
