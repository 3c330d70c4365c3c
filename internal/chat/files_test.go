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

func TestEstimateAndTranscriptOfFiles(t *testing.T) {
	img := Part{Type: PartFile, FileID: "file_1", MediaType: "image/png", Name: "cat.png"}
	msgs := []Message{{Role: RoleUser, Parts: []Part{TextPart("look"), img}}}
	if got := EstimateTokens(msgs); got < fileTokens {
		t.Errorf("a message with an image is estimated at %d tokens, want at least %d", got, fileTokens)
	}
	txt := Part{Type: PartFile, MediaType: "text/plain", Name: "a.txt", Data: []byte(strings.Repeat("word ", 4000))}
	if got := EstimateTokens([]Message{{Role: RoleUser, Parts: []Part{txt}}}); got < 5000 {
		t.Errorf("a loaded 20,000-byte text file is estimated at %d tokens, want about 5,000", got)
	}
	tr := Transcript(nil, msgs, 10_000)
	if !strings.Contains(tr, `[user attached the file "cat.png" (image/png)]`) || !strings.Contains(tr, "look") {
		t.Errorf("transcript %q does not name the file", tr)
	}
}
