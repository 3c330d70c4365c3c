package engine_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// failingFiles is the store's files, except one that cannot be read.
type failingFiles struct {
	store.Store
	broken string
}

func (f failingFiles) FileData(ctx context.Context, owner, id string) (store.File, []byte, error) {
	if id == f.broken {
		return store.File{}, nil, errors.New("disk on fire")
	}
	return f.Store.FileData(ctx, owner, id)
}

// A user message's files reach the model with their bytes, read from the
// store for the call: a file deleted after it was posted too. A file that
// cannot be read becomes a note and the chat goes on. Nothing of the bytes
// is stored in the chat.
func TestFilesReachTheModel(t *testing.T) {
	onBothStores(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		upload := func(name string, data []byte) store.File {
			f, err := h.svc.UploadFile(ctx, owner, name, bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		photo := upload("photo.png", llmtest.PNG)
		notes := upload("notes.md", []byte("# Notes\nbuy milk\n"))
		broken := upload("broken.png", llmtest.PNG)
		content, _ := json.Marshal([]map[string]string{
			{"type": "text", "text": "What is this?"},
			{"type": "file", "file_id": photo.ID}, {"type": "file", "file_id": notes.ID}, {"type": "file", "file_id": broken.ID},
		})
		c, err := h.svc.CreateChat(ctx, owner, service.NewChat{Message: content, Title: "test chat"})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.svc.DeleteFile(ctx, owner, photo.ID); err != nil { // the message keeps it
			t.Fatal(err)
		}
		h.fake.Push(llmtest.Turn{Text: "A red pixel."})
		cfg := h.cfg
		cfg.Files = failingFiles{Store: h.st, broken: broken.ID}
		h.startOn(h.st, h.ps, h.models(), nil, cfg)
		h.waitStatus(c.ID, chat.Waiting)

		reqs := h.waitRequests(1)
		var body struct {
			Messages []struct {
				Role    string           `json:"role"`
				Content []map[string]any `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(reqs[0].Body, &body); err != nil || len(body.Messages) != 1 {
			t.Fatalf("request %s: %v", reqs[0].Body, err)
		}
		parts := body.Messages[0].Content
		if len(parts) != 4 || parts[1]["type"] != "image_url" {
			t.Fatalf("the model got %v", parts)
		}
		url, _ := parts[1]["image_url"].(map[string]any)["url"].(string)
		b64, ok := strings.CutPrefix(url, "data:image/png;base64,")
		if data, err := base64.StdEncoding.DecodeString(b64); !ok || err != nil || !bytes.Equal(data, llmtest.PNG) {
			t.Errorf("the image reached the model as %.60s", url)
		}
		if parts[2]["text"] != "File notes.md:\n# Notes\nbuy milk\n" {
			t.Errorf("the text file reached the model as %v", parts[2])
		}
		if parts[3]["text"] != "[file broken.png is no longer available]" {
			t.Errorf("the broken file reached the model as %v", parts[3])
		}
		h.waitLog("file not sent to the model", broken.ID, "disk on fire")

		h0 := h.history(c.ID)[0]
		stored, _ := json.Marshal(h0.Parts)
		if bytes.Contains(stored, []byte(b64[:40])) || len(h0.Parts) != 4 || h0.Parts[1].FileID != photo.ID || h0.Parts[1].Name != "photo.png" {
			t.Errorf("the stored message is %s", stored)
		}
	})
}
