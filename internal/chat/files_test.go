package chat

import (
	"strings"
	"testing"
)

func TestFileKindOf(t *testing.T) {
	for mt, want := range map[string]string{
		"image/png": FileImage, "image/JPEG": FileImage, "image/gif": FileImage, "image/webp": FileImage,
		"application/pdf": FilePDF, "text/plain; charset=utf-8": FileText, "text/markdown": FileText,
		"application/json": FileText, "text/csv": FileText, "image/bmp": "", "application/zip": "", "": "",
	} {
		if got := FileKindOf(mt); got != want {
			t.Errorf("FileKindOf(%q) = %q, want %q", mt, got, want)
		}
	}
}

// A compaction's transcript names old files and never carries their bytes.
func TestTranscriptNamesFiles(t *testing.T) {
	secret := "SECRET-BYTES"
	msgs := []Message{
		{ID: 1, Role: RoleUser, Parts: []Part{
			TextPart("what is this?"),
			{Type: PartFile, FileID: "file_1", MediaType: "image/png", Name: "photo.png", Data: []byte(secret)},
			{Type: PartFile, MediaType: "application/pdf", Name: "report.pdf", URL: "data:application/pdf;base64,U0VDUkVULUJZVEVT"},
			{Type: PartFile, FileID: "file_3", MediaType: "text/plain", Name: "notes.txt", Data: []byte(secret)},
			{Type: PartFile, URL: "https://example.com/cat.jpg"},
		}},
		{ID: 2, Role: RoleAssistant, Parts: []Part{TextPart("a cat")}},
	}
	got := Transcript(nil, msgs, 1<<20)
	for _, want := range []string{"[user attached image photo.png]", "[user attached PDF report.pdf]",
		"[user attached file notes.txt]", "[user attached image https://example.com/cat.jpg]"} {
		if !strings.Contains(got, want) {
			t.Errorf("transcript lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, secret) || strings.Contains(got, "U0VDUkVULUJZVEVT") {
		t.Errorf("transcript carries a file's bytes:\n%s", got)
	}
}

func TestEstimateTokensCountsFiles(t *testing.T) {
	one := func(p Part) int64 { return EstimateTokens([]Message{{Role: RoleUser, Parts: []Part{p}}}) - 4 }
	if got := one(Part{Type: PartFile, MediaType: "image/png", Name: "a.png", URL: "data:image/png;base64," + strings.Repeat("A", 400000)}); got != ImageTokens {
		t.Errorf("an image = %d, want %d whatever its size", got, ImageTokens)
	}
	if got := one(Part{Type: PartFile, MediaType: "application/pdf", Name: "a.pdf"}); got != PDFTokens {
		t.Errorf("a PDF = %d, want %d", got, PDFTokens)
	}
	if got := one(Part{Type: PartFile, MediaType: "text/plain", Name: "n.txt", Data: make([]byte, 4000)}); got != EstimateText("n.txt")+1000 {
		t.Errorf("a loaded 4,000-byte text file = %d, want its name and 1000", got)
	}
	if got := one(Part{Type: PartFile, MediaType: "text/plain", Name: "n.txt"}); got != FileTokens {
		t.Errorf("a text file not loaded = %d, want %d", got, FileTokens)
	}
}
