package anthropic_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

func TestFilesReachTheModel(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Text: "A red pixel."})
	req := llm.Request{Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{
		chat.TextPart("What is in these?"),
		{Type: chat.PartFile, FileID: "file_1", MediaType: "image/png", Name: "photo.png", Data: llmtest.PNG},
		{Type: chat.PartFile, FileID: "file_2", MediaType: "application/pdf", Name: "report.pdf", Data: llmtest.PDF},
		{Type: chat.PartFile, FileID: "file_3", MediaType: "text/csv", Name: "data.csv", Data: []byte("a,b\n1,2\n")},
		{Type: chat.PartFile, URL: "https://example.com/cat.jpg"},
		{Type: chat.PartFile, URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(llmtest.PNG)},
		{Type: chat.PartFile, FileID: "file_4", MediaType: "image/png", Name: "gone.png"},
	}}}}
	if _, _, err := run(t, p, req); err != nil {
		t.Fatal(err)
	}
	reqs := f.Requests()
	if len(reqs) != 1 || reqs[0].Rejected != "" {
		t.Fatalf("requests: %d, rejected %q", len(reqs), reqs[0].Rejected)
	}
	var body struct {
		Messages []struct {
			Content []any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil || len(body.Messages) != 1 {
		t.Fatalf("body: %v %s", err, reqs[0].Body)
	}
	b64 := base64.StdEncoding.EncodeToString(llmtest.PNG)
	want := []any{
		map[string]any{"type": "text", "text": "What is in these?"},
		map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64}},
		map[string]any{"type": "document", "title": "report.pdf", "source": map[string]any{
			"type": "base64", "media_type": "application/pdf", "data": base64.StdEncoding.EncodeToString(llmtest.PDF)}},
		map[string]any{"type": "text", "text": "File data.csv:\na,b\n1,2\n"},
		map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": "https://example.com/cat.jpg"}},
		map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64}},
		map[string]any{"type": "text", "text": "[file gone.png is no longer available]"},
	}
	got := body.Messages[0].Content
	if len(got) != len(want) {
		t.Fatalf("%d blocks, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("block %d = %v\nwant %v", i, got[i], want[i])
		}
	}
	if raw, _ := base64.StdEncoding.DecodeString(b64); string(raw) != string(llmtest.PNG) {
		t.Error("the image's base64 does not decode to the uploaded bytes")
	}
}

// An image whose bytes are not of its media type reaches the fake through
// the SDK and is refused with the API's 400.
func TestMalformedImageRefused(t *testing.T) {
	p, f := setup(t)
	req := llm.Request{Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{
		{Type: chat.PartFile, MediaType: "image/jpeg", Name: "x.jpg", Data: llmtest.PNG},
	}}}}
	_, _, err := run(t, p, req)
	if e := apiError(t, err); e.HTTPStatus != http.StatusBadRequest || e.Retryable {
		t.Fatalf("err = %v, want a 400 that is not retried", e)
	}
	want := "messages.0.content.0.image.source.base64.data: Image does not match the provided media type image/jpeg"
	if reqs := f.Requests(); len(reqs) != 1 || !strings.Contains(reqs[0].Rejected, want) {
		t.Errorf("rejected: %v", reqs)
	}
}
