package chat

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestParseContentFileParts(t *testing.T) {
	parts, err := ParseContent(json.RawMessage(`[{"type":"text","text":"see"},{"type":"file","file_id":"file_1","name":"x","media_type":"text/html"}]`), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	// What the client says of the file is dropped: the server fills it in.
	if len(parts) != 2 || fmt.Sprint(parts[1]) != fmt.Sprint(Part{Type: PartFile, FileID: "file_1"}) {
		t.Fatalf("parts %+v", parts)
	}
	if _, err := ParseContent(json.RawMessage(`[{"type":"file","file_id":"file_1"}]`), DefaultLimits); err != nil {
		t.Fatalf("a file alone: %v", err)
	}
	many := make([]string, MaxFileParts+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"type":"file","file_id":"file_%d"}`, i)
	}
	for raw, field := range map[string]string{
		`[{"type":"file"}]`: "content[0].file_id",
		`[{"type":"text","text":"a"},{"type":"file","url":"https://example.com/a.png"}]`: "content[1].file_id",
		`[{"type":"file","file_id":"file_1","url":"https://example.com/a.png"}]`:         "content[0].file_id",
		`[{"type":"image","file_id":"file_1"}]`:                                          "content[0].type",
		"[" + strings.Join(many, ",") + "]":                                              "content",
	} {
		_, err := ParseContent(json.RawMessage(raw), DefaultLimits)
		if ve, ok := err.(*ValidationError); !ok || ve.Field != field {
			t.Errorf("content %.80s: got %v, want an error on %s", raw, err, field)
		}
	}
}

func TestFilePartJSON(t *testing.T) {
	p := Part{Type: PartFile, FileID: "file_1", MediaType: "image/png", Name: "cat.png", Data: []byte("secret bytes")}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"type":"file","file_id":"file_1","media_type":"image/png","name":"cat.png"}` {
		t.Fatalf("a file part as JSON: %s", b)
	}
	var back Part
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	p.Data = nil
	if fmt.Sprint(back) != fmt.Sprint(p) {
		t.Fatalf("round trip %+v, want %+v", back, p)
	}
	u, _ := json.Marshal(Part{Type: PartFile, URL: "https://example.com/a.png"})
	if string(u) != `{"type":"file","url":"https://example.com/a.png"}` {
		t.Fatalf("a URL part as JSON: %s", u)
	}
}

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
