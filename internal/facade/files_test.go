package facade_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

var (
	pngURL = "data:image/png;base64," + base64.StdEncoding.EncodeToString(llmtest.PNG)
	pdfURL = "data:application/pdf;base64," + base64.StdEncoding.EncodeToString(llmtest.PDF)
)

// upstreamParts returns the content parts of the last user message of the
// model's i-th request (the fake upstream is Chat Completions).
func upstreamParts(t *testing.T, fake *llmtest.OpenAIChat, i int) []map[string]any {
	t.Helper()
	msgs, _ := modelRequest(t, fake, i)
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		t.Fatalf("the model's request %d ends with %v", i, roles(msgs))
	}
	raw, _ := json.Marshal(msgs[len(msgs)-1].Content)
	var parts []map[string]any
	if err := json.Unmarshal(raw, &parts); err != nil {
		t.Fatalf("the user message's content is not parts: %s", raw)
	}
	return parts
}

// dataURLBytes decodes a base64 data URL of media type mt.
func dataURLBytes(t *testing.T, url, mt string) []byte {
	t.Helper()
	b64, ok := strings.CutPrefix(url, "data:"+mt+";base64,")
	if !ok {
		t.Fatalf("not a %s data URL: %.60s", mt, url)
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// An image sent through the official Go client reaches the model as an
// image_url part whose data URL holds exactly the client's bytes, and the
// chat's history holds it as a file part.
func TestImageThroughChatCompletions(t *testing.T) {
	onBothStores(t, func(t *testing.T, r *replica, fake *llmtest.OpenAIChat) {
		fake.Push(llmtest.Turn{Text: "A red pixel."})
		c := r.client(r.token("alice"))
		res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "fake",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("What is this?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: pngURL}),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/cat.jpg"}),
			})},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].Message.Content != "A red pixel." {
			t.Fatalf("answer %+v", res.Choices[0].Message)
		}
		parts := upstreamParts(t, fake, 0)
		if len(parts) != 3 || parts[0]["type"] != "text" || parts[1]["type"] != "image_url" || parts[2]["type"] != "image_url" {
			t.Fatalf("the model got %v", parts)
		}
		url, _ := parts[1]["image_url"].(map[string]any)["url"].(string)
		if got := dataURLBytes(t, url, "image/png"); !bytes.Equal(got, llmtest.PNG) {
			t.Errorf("the model got %d bytes, not the client's %d", len(got), len(llmtest.PNG))
		}
		if web, _ := parts[2]["image_url"].(map[string]any)["url"].(string); web != "https://example.com/cat.jpg" {
			t.Errorf("the web image reached the model as %q", web)
		}
		h := r.history(r.onlyChat("alice").ID)
		if len(h) < 1 || len(h[0].Parts) != 3 || h[0].Parts[1].Type != chat.PartFile || h[0].Parts[1].URL != pngURL ||
			h[0].Parts[1].MediaType != "image/png" || h[0].Parts[2].URL != "https://example.com/cat.jpg" {
			t.Fatalf("stored history %+v", h)
		}
	})
}

// Responses input_image and input_file reach the model as an image and a
// PDF, through the official Go client, to a model whose inputs take PDFs.
func TestFilesThroughResponses(t *testing.T) {
	r, fake := newSQLite(t, func(d *api.Deps) { d.Config.Models[0].Inputs = []string{"text", "image", "pdf"} })
	fake.Push(llmtest.Turn{Text: "Both show red."})
	content := responses.ResponseInputMessageContentListParam{
		responses.ResponseInputContentParamOfInputText("Compare these."),
		{OfInputImage: &responses.ResponseInputImageParam{ImageURL: openai.String(pngURL), Detail: responses.ResponseInputImageDetailAuto}},
		{OfInputFile: &responses.ResponseInputFileParam{FileData: openai.String(pdfURL), Filename: openai.String("report.pdf")}},
	}
	c := r.client(r.token("alice"))
	res, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "fake",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser),
		}},
	})
	if err != nil {
		var e *openai.Error
		errors.As(err, &e)
		t.Fatalf("%v: %s", err, e.RawJSON())
	}
	if res.OutputText() != "Both show red." {
		t.Fatalf("answer %q", res.OutputText())
	}
	parts := upstreamParts(t, fake, 0)
	if len(parts) != 3 || parts[1]["type"] != "image_url" || parts[2]["type"] != "file" {
		t.Fatalf("the model got %v", parts)
	}
	url, _ := parts[1]["image_url"].(map[string]any)["url"].(string)
	if !bytes.Equal(dataURLBytes(t, url, "image/png"), llmtest.PNG) {
		t.Error("the image's bytes changed on the way")
	}
	file, _ := parts[2]["file"].(map[string]any)
	data, _ := file["file_data"].(string)
	if !bytes.Equal(dataURLBytes(t, data, "application/pdf"), llmtest.PDF) || file["filename"] != "report.pdf" {
		t.Errorf("the PDF reached the model as %v", file)
	}
}

// Bad images and files, and those the model does not take, are refused
// with a 400 in OpenAI's shape, naming the part, before anything is
// written or sent.
func TestFileRefusals(t *testing.T) {
	r, fake := newSQLite(t, func(d *api.Deps) {
		d.Config.Models[0].Inputs = []string{"text", "image"}
		d.Config.Files.MaxBytes = 1000
	})
	tok := r.token("alice")
	bigText := "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("a", 1001)))
	user := func(parts string) string {
		return `{"model":"fake","messages":[{"role":"user","content":[{"type":"text","text":"see"},` + parts + `]}]}`
	}
	image := func(url string) string { return `{"type":"image_url","image_url":{"url":"` + url + `"}}` }
	const at = "messages[0].content[1]"
	for _, c := range []struct{ name, body, param, says string }{
		{"bad base64", user(image("data:image/png;base64,@@@")), at + ".image_url.url", "invalid base64"},
		{"unsupported type", user(image("data:image/bmp;base64,Qk0=")), at + ".image_url.url", "image/bmp"},
		{"bytes not of the type", user(image("data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(llmtest.PNG))), at + ".image_url.url", "not image/jpeg data"},
		{"not a URL", user(image("file:///etc/passwd")), at + ".image_url.url", "data URL"},
		{"a PDF the model does not take", user(`{"type":"file","file":{"file_data":"` + pdfURL + `","filename":"a.pdf"}}`), at, "does not take pdf input"},
		{"a file over files.max_bytes", user(`{"type":"file","file":{"file_data":"` + bigText + `","filename":"a.txt"}}`), at, "at most 1000 allowed (files.max_bytes)"},
		{"an OpenAI file id", user(`{"type":"file","file":{"file_id":"file-abc"}}`), at + ".file", "file_data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, out := r.post(tok, "/chat/completions", c.body)
			e, _ := out["error"].(map[string]any)
			if status != http.StatusBadRequest || e["param"] != c.param || e["type"] != "invalid_request_error" ||
				!strings.Contains(e["message"].(string), c.says) {
				t.Fatalf("%d %v, want a 400 naming %s and saying %q", status, out, c.param, c.says)
			}
		})
	}
	// The Responses API names its own fields.
	status, out := r.post(tok, "/responses", `{"model":"fake","input":[{"role":"user","content":[`+
		`{"type":"input_text","text":"see"},{"type":"input_image","image_url":"data:image/png;base64,@@@"}]}]}`)
	if e, _ := out["error"].(map[string]any); status != http.StatusBadRequest || e["param"] != "input[0].content[1].image_url" {
		t.Fatalf("responses: %d %v", status, out)
	}
	if n := len(r.chats("alice")); n != 0 {
		t.Fatalf("%d chats written", n)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("the model got %d requests", n)
	}

	// The official client sees the refusal as a BadRequest with its param.
	c := r.client(tok)
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{FileData: openai.String(pdfURL), Filename: openai.String("a.pdf")}),
		})},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "messages[0].content[0]" {
		t.Fatalf("err = %v", err)
	}
}

// A continued response takes text only, and says so.
func TestContinuedResponseRefusesFiles(t *testing.T) {
	r, fake := newSQLite(t)
	tok := r.token("alice")
	fake.Push(llmtest.Turn{Text: "Hi."})
	status, first := r.post(tok, "/responses", `{"model":"fake","input":"hello"}`)
	if status != http.StatusOK {
		t.Fatalf("%d %v", status, first)
	}
	status, out := r.post(tok, "/responses", `{"model":"fake","previous_response_id":"`+first["id"].(string)+`","input":[{"role":"user","content":[`+
		`{"type":"input_text","text":"and this?"},{"type":"input_image","image_url":"`+pngURL+`"}]}]}`)
	e, _ := out["error"].(map[string]any)
	if status != http.StatusBadRequest || e["param"] != "input[0].content[1]" || !strings.Contains(e["message"].(string), "without previous_response_id") {
		t.Fatalf("%d %v", status, out)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("the model got %d requests", n)
	}
}
