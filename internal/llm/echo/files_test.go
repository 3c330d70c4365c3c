package echo

import (
	"testing"

	"github.com/parleyhq/parley/internal/chat"
)

func TestSaysWhatFilesItGot(t *testing.T) {
	msg := chat.Message{Role: chat.RoleUser, Parts: []chat.Part{
		chat.TextPart("look"),
		{Type: chat.PartFile, FileID: "file_1", MediaType: "image/png", Name: "photo.png", Data: make([]byte, 1234)},
		{Type: chat.PartFile, FileID: "file_2", MediaType: "application/pdf", Name: "report.pdf", Data: make([]byte, 56)},
		{Type: chat.PartFile, FileID: "file_3", MediaType: "text/plain", Name: "notes.txt", Data: []byte("hello")},
		{Type: chat.PartFile, URL: "https://example.com/cat.jpg"},
		{Type: chat.PartFile, URL: "data:image/gif;base64,R0lGODlh"},
		{Type: chat.PartFile, FileID: "file_4", MediaType: "image/png", Name: "gone.png"},
	}}
	res, _ := run(t, msg)
	want := "echo: look\n[image photo.png, 1234 bytes]\n[pdf report.pdf, 56 bytes]\n[text file notes.txt, 5 bytes]\n" +
		"[image https://example.com/cat.jpg]\n[image (unnamed), 6 bytes]\n[file gone.png is no longer available]"
	if len(res.Parts) != 1 || res.Parts[0].Text != want {
		t.Errorf("answer = %+v\nwant %q", res.Parts, want)
	}

	onlyFile := chat.Message{Role: chat.RoleUser, Parts: []chat.Part{
		{Type: chat.PartFile, MediaType: "image/png", Name: "a.png", Data: []byte{1, 2}},
	}}
	if res, _ := run(t, onlyFile); len(res.Parts) != 1 || res.Parts[0].Text != "echo: [image a.png, 2 bytes]" {
		t.Errorf("a file alone: %+v", res.Parts)
	}
}
