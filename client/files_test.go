package client_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/client"
)

// pngBytes is a 1x1 PNG.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")

// onlyReader hides every method but Read, so nothing can learn the size
// of what it reads or read it twice.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestFiles: a file uploaded with UploadFile streams (a chunked body, not
// one read whole first), comes back with its metadata and content, is
// listed, goes into a new chat's first message and a later one as a file
// part the model gets, and is deleted.
func TestFiles(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client()
	ctx := testCtx(t)

	f, err := c.UploadFile(ctx, "dot.png", onlyReader{bytes.NewReader(pngBytes)})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pngBytes)
	if !strings.HasPrefix(f.ID, "file_") || f.Name != "dot.png" || f.MediaType != "image/png" ||
		f.Size != int64(len(pngBytes)) || f.SHA256 != hex.EncodeToString(sum[:]) || f.CreatedAt.IsZero() {
		t.Fatalf("uploaded %+v", f)
	}
	ups := s.requestsTo("/api/v1/files")
	if len(ups) != 1 || ups[0].ContentLength != -1 || !strings.HasPrefix(ups[0].Header.Get("Content-Type"), "multipart/form-data; boundary=") {
		t.Fatalf("the upload requests: %d; want one multipart request of unknown length (streamed)", len(ups))
	}

	got, err := c.GetFile(ctx, f.ID)
	if err != nil || got != f {
		t.Fatalf("GetFile: %+v, %v; want %+v", got, err, f)
	}
	rc, err := c.FileContent(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(data, pngBytes) {
		t.Fatalf("FileContent: %d bytes, %v; want the upload's %d", len(data), err, len(pngBytes))
	}
	page, err := c.ListFiles(ctx, client.ListFilesOptions{})
	if err != nil || len(page.Files) != 1 || page.Files[0].ID != f.ID || page.NextCursor != "" {
		t.Fatalf("ListFiles: %+v, %v", page, err)
	}

	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Title: "dot",
		Message: []client.Part{client.TextPart("What is this?"), client.FilePart(f.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	if _, err := c.PostMessage(ctx, ch.ID, client.PostMessageRequest{Content: []client.Part{client.FilePart(f.ID)}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	msgs, err := c.AllMessages(ctx, ch.ID, 0)
	if err != nil || len(msgs) != 4 {
		t.Fatalf("messages: %d, %v; want 4", len(msgs), err)
	}
	for _, i := range []int{0, 2} {
		var file *client.Part
		for j, p := range msgs[i].Parts {
			if p.Type == client.PartFile {
				file = &msgs[i].Parts[j]
			}
		}
		if msgs[i].Role != client.RoleUser || file == nil || file.FileID != f.ID || file.Name != "dot.png" || file.MediaType != "image/png" {
			t.Errorf("message %d: %+v; want a user message with the file part of dot.png", i, msgs[i])
		}
		if answer := msgs[i+1].Text(); !strings.Contains(answer, "dot.png") {
			t.Errorf("the answer to message %d is %q; want the echo model to name the file it got", i, answer)
		}
	}

	if err := c.DeleteFile(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetFile(ctx, f.ID); !client.IsStatus(err, http.StatusNotFound) {
		t.Errorf("GetFile after DeleteFile: %v; want a 404", err)
	}
	if page, err := c.ListFiles(ctx, client.ListFilesOptions{}); err != nil || len(page.Files) != 0 {
		t.Errorf("ListFiles after DeleteFile: %+v, %v; want none", page, err)
	}
}

// failingReader reads some bytes, then fails.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestUploadFileRefusals: a kind of file the server does not take is a
// 415, a file over files.max_bytes a 413 (answered while it streams), and
// a reader that fails ends the upload with its error; none of them leaves
// a file.
func TestUploadFileRefusals(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client()
	ctx := testCtx(t)

	_, err := c.UploadFile(ctx, "tool.exe", bytes.NewReader([]byte("MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00")))
	if !client.IsStatus(err, http.StatusUnsupportedMediaType) {
		t.Errorf("an executable: %v; want a 415", err)
	}

	// Over the default limit of 20 MB: the server answers before it read
	// it all, and the client reports the answer, not a broken connection.
	big := io.MultiReader(bytes.NewReader(pngBytes), io.LimitReader(zeros{}, 21<<20))
	_, err = c.UploadFile(ctx, "huge.png", big)
	if !client.IsStatus(err, http.StatusRequestEntityTooLarge) {
		t.Errorf("a file over the limit: %v; want a 413", err)
	}

	boom := errors.New("the disk went away")
	_, err = c.UploadFile(ctx, "half.png", &failingReader{data: pngBytes, err: boom})
	if !errors.Is(err, boom) {
		t.Errorf("a failing reader: %v; want its error", err)
	}

	if page, err := c.ListFiles(ctx, client.ListFilesOptions{}); err != nil || len(page.Files) != 0 {
		t.Errorf("ListFiles after the refusals: %+v, %v; want none", page, err)
	}
}

// zeros reads zero bytes forever.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
