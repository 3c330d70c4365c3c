package openai_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// withFiles is a user message with an image, a PDF and a text file between
// its texts, an image on the web, and a file whose bytes are gone.
var withFiles = llm.Request{Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{
	chat.TextPart("What is in these?"),
	{Type: chat.PartFile, FileID: "file_1", MediaType: "image/png", Name: "photo.png", Data: llmtest.PNG},
	{Type: chat.PartFile, FileID: "file_2", MediaType: "application/pdf", Name: "report.pdf", Data: llmtest.PDF},
	{Type: chat.PartFile, FileID: "file_3", MediaType: "text/markdown", Name: "notes.md", Data: []byte("# Notes\nbuy milk")},
	{Type: chat.PartFile, URL: "https://example.com/cat.jpg"},
	{Type: chat.PartFile, FileID: "file_4", MediaType: "image/png", Name: "gone.png"},
	chat.TextPart("Thanks."),
}}}}

// userContent is the content of the request's last user message, in either
// API's shape.
func userContent(t *testing.T, a api, body []byte) []map[string]any {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
		Input []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("body: %v\n%s", err, body)
	}
	msgs := req.Messages
	if a.name == "openai-responses" {
		msgs = req.Input
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		t.Fatalf("no user message last in %s", body)
	}
	return msgs[len(msgs)-1].Content
}

// decodeDataURL returns the media type and bytes of a base64 data URL.
func decodeDataURL(t *testing.T, url string) (string, []byte) {
	t.Helper()
	meta, data, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ",")
	if !ok || !strings.HasPrefix(url, "data:") || !strings.HasSuffix(meta, ";base64") {
		t.Fatalf("not a base64 data URL: %.60s", url)
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		t.Fatalf("data URL: %v", err)
	}
	return strings.TrimSuffix(meta, ";base64"), raw
}

func TestFilesReachTheModel(t *testing.T) {
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		f.Push(llmtest.Turn{Text: "A red pixel."})
		if _, _, err := stream(t, p, withFiles); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		reqs := f.Requests()
		if len(reqs) != 1 || reqs[0].Rejected != "" {
			t.Fatalf("requests: %d, rejected %q", len(reqs), reqs[0].Rejected)
		}
		parts := userContent(t, a, reqs[0].Body)
		if len(parts) != 7 {
			t.Fatalf("%d content parts, want 7 in order: %v", len(parts), parts)
		}
		text, image, file := "text", "image_url", "file"
		if a.name == "openai-responses" {
			text, image, file = "input_text", "input_image", "input_file"
		}
		for i, want := range []string{text, image, file, text, image, text, text} {
			if parts[i]["type"] != want {
				t.Errorf("part %d is %v, want %s", i, parts[i]["type"], want)
			}
		}
		imageURL := func(p map[string]any) string {
			if a.name == "openai-responses" {
				s, _ := p["image_url"].(string)
				return s
			}
			s, _ := p["image_url"].(map[string]any)["url"].(string)
			return s
		}
		mt, got := decodeDataURL(t, imageURL(parts[1]))
		if mt != "image/png" || !bytes.Equal(got, llmtest.PNG) {
			t.Errorf("image: %s, %d bytes; want image/png with the uploaded %d bytes", mt, len(got), len(llmtest.PNG))
		}
		pdf := parts[2]
		if a.name == "openai" {
			pdf, _ = parts[2]["file"].(map[string]any)
		}
		fileData, _ := pdf["file_data"].(string)
		mt, got = decodeDataURL(t, fileData)
		if mt != "application/pdf" || !bytes.Equal(got, llmtest.PDF) || pdf["filename"] != "report.pdf" {
			t.Errorf("PDF: %s, %d bytes, filename %v", mt, len(got), pdf["filename"])
		}
		if s := parts[3]["text"]; s != "File notes.md:\n# Notes\nbuy milk" {
			t.Errorf("text file = %q", s)
		}
		if u := imageURL(parts[4]); u != "https://example.com/cat.jpg" {
			t.Errorf("web image = %q, want the URL as is", u)
		}
		if s := parts[5]["text"]; s != "[file gone.png is no longer available]" {
			t.Errorf("missing file = %q", s)
		}
	})
}

// A malformed image reaches the fake through the SDK and is refused with
// the API's 400, which the provider reports as a bad request.
func TestMalformedImageRefused(t *testing.T) {
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		req := llm.Request{Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{
			{Type: chat.PartFile, URL: "data:image/png;base64,bm90IGFuIGltYWdl"}, // "not an image"
		}}}}
		_, _, err := stream(t, p, req)
		e := llmError(t, err)
		if e.HTTPStatus != http.StatusBadRequest || e.Retryable {
			t.Fatalf("err = %v, want a 400 that is not retried", e)
		}
		reqs := f.Requests()
		if len(reqs) != 1 || !strings.Contains(reqs[0].Rejected, "Expected a base64-encoded data URL with an image MIME type") {
			t.Errorf("rejected: %q", reqs[0].Rejected)
		}
	})
}
