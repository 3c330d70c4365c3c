package llm

import (
	"errors"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
)

func TestParseDataURL(t *testing.T) {
	mt, data, err := ParseDataURL("data:Image/PNG;base64,aGVsbG8=")
	if err != nil || mt != "image/png" || string(data) != "hello" {
		t.Fatalf("= %q %q %v", mt, data, err)
	}
	for _, bad := range []string{
		"aGVsbG8=",                     // no prefix
		"data:image/png;base64",        // no comma
		"data:image/png,hello",         // not base64
		"data:;base64,aGVsbG8=",        // no media type
		"data:image/png;base64,%%%",    // bad base64
		"data:image/png;base64,aGVsbG", // bad padding
		"data:image/png;base64,",       // empty
	} {
		if _, _, err := ParseDataURL(bad); !errors.Is(err, ErrDataURL) {
			t.Errorf("ParseDataURL(%q) = %v, want ErrDataURL", bad, err)
		}
	}
}

func TestFileOf(t *testing.T) {
	for _, c := range []struct {
		name string
		part chat.Part
		kind string
		text string
	}{
		{"stored image", chat.Part{MediaType: "image/png", Name: "a.png", Data: []byte{1}}, chat.FileImage, ""},
		{"data URL PDF", chat.Part{Name: "r.pdf", URL: "data:application/pdf;base64,JVBERi0="}, chat.FilePDF, ""},
		{"web image", chat.Part{URL: "https://example.com/a.png"}, chat.FileImage, ""},
		{"text file", chat.Part{MediaType: "text/plain", Name: "n.txt", Data: []byte("hi")}, chat.FileText, "File n.txt:\nhi"},
		{"bytes not loaded", chat.Part{FileID: "file_1", MediaType: "image/png", Name: "gone.png"}, "", "[file gone.png is no longer available]"},
		{"bad data URL", chat.Part{URL: "data:image/png;base64,%%"}, "", "[image (unnamed) could not be read: not a base64 data URL: invalid base64 data: illegal base64 data at input byte 0]"},
		{"unknown type", chat.Part{MediaType: "application/zip", Name: "a.zip", Data: []byte{1}}, "", "[file a.zip of type application/zip cannot be sent to the model]"},
	} {
		c.part.Type = chat.PartFile
		if f := FileOf(c.part); f.Kind != c.kind || f.Text != c.text {
			t.Errorf("%s: kind %q text %q, want %q %q", c.name, f.Kind, f.Text, c.kind, c.text)
		}
	}
}
