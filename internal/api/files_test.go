package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// Small files of each kind, as their bytes begin.
var (
	pngBytes = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"), bytes.Repeat([]byte{1}, 2000)...)
	pdfBytes = []byte("%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")
)

// uploaded is the body of a 201 from POST /api/v1/files.
type uploaded struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	CreatedAt string `json:"created_at"`
}

// form returns a multipart/form-data body with one file field and its
// Content-Type header.
func form(t *testing.T, field, name, declared string, content []byte) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, field, name))
	h.Set("Content-Type", declared)
	pw, err := w.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	pw.Write(content)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.FormDataContentType()
}

// postForm sends a multipart body to POST /api/v1/files.
func (s *server) postForm(token string, body []byte, contentType string) response {
	s.t.Helper()
	req, err := http.NewRequest("POST", s.url+"/api/v1/files", bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", contentType)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// upload stores a file for the token's owner and fails unless it is 201.
func (s *server) upload(token, name, declared string, content []byte) uploaded {
	s.t.Helper()
	body, ct := form(s.t, "file", name, declared, content)
	var f uploaded
	s.postForm(token, body, ct).expect(s.t, http.StatusCreated, &f)
	return f
}

// fileList is the body of GET /api/v1/files.
type fileList struct {
	Files      []uploaded `json:"files"`
	NextCursor string     `json:"next_cursor"`
}

func fileIDs(l fileList) []string {
	ids := []string{}
	for _, f := range l.Files {
		ids = append(ids, f.ID)
	}
	return ids
}

// filesConfig is the test configuration with a request body limit far
// below the files' size limit, and the echo model taking text and images.
func filesConfig(su *setup) {
	su.cfg.Limits.MaxBodyBytes = 1024
	su.cfg.Files.MaxBytes = 64 << 10
	su.cfg.Models[0].Inputs = []string{"text", "image"}
}

func TestFileRoutes(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s := newOn(t, backend, filesConfig)
		alice := s.token("alice")

		// The part's declared type is not trusted: the bytes are a PNG. The
		// body is larger than limits.max_body_bytes: uploads have their own.
		img := s.upload(alice, "notes.txt", "text/plain", pngBytes)
		sum := sha256.Sum256(pngBytes)
		if img.MediaType != "image/png" || img.Name != "notes.txt" || img.Size != int64(len(pngBytes)) ||
			img.SHA256 != hex.EncodeToString(sum[:]) || len(img.ID) < 10 || img.ID[:5] != "file_" || img.CreatedAt == "" {
			t.Fatalf("uploaded %+v", img)
		}
		var got uploaded
		s.do("GET", "/api/v1/files/"+img.ID, alice, nil).expect(t, http.StatusOK, &got)
		if got != img {
			t.Fatalf("GET metadata %+v, want %+v", got, img)
		}
		res := s.do("GET", "/api/v1/files/"+img.ID+"/content", alice, nil)
		if res.status != http.StatusOK || !bytes.Equal(res.body, pngBytes) {
			t.Fatalf("content: %d, %d bytes", res.status, len(res.body))
		}
		for k, want := range map[string]string{
			"Content-Type": "image/png", "X-Content-Type-Options": "nosniff", "Content-Disposition": `inline; filename=notes.txt`,
			"Content-Security-Policy": "default-src 'none'; sandbox", "Content-Length": fmt.Sprint(len(pngBytes)),
		} {
			if res.header.Get(k) != want {
				t.Errorf("content header %s: %q, want %q", k, res.header.Get(k), want)
			}
		}

		md := s.upload(alice, "read me.md", "application/octet-stream", []byte("# Title\n\nSome *text*.\n"))
		if md.MediaType != "text/markdown" {
			t.Fatalf("a Markdown file is %q", md.MediaType)
		}
		res = s.do("GET", "/api/v1/files/"+md.ID+"/content", alice, nil)
		if ct, cd := res.header.Get("Content-Type"), res.header.Get("Content-Disposition"); ct != "text/markdown; charset=utf-8" || cd != `attachment; filename="read me.md"` {
			t.Errorf("a text file served as %q, %q", ct, cd)
		}

		// The same bytes again: a new file, the same content.
		again := s.upload(alice, "again.png", "image/png", pngBytes)
		if again.ID == img.ID || again.SHA256 != img.SHA256 {
			t.Fatalf("the same bytes again: %+v", again)
		}

		// Newest first, a page at a time.
		var page fileList
		s.do("GET", "/api/v1/files?limit=2", alice, nil).expect(t, http.StatusOK, &page)
		if ids := fileIDs(page); len(ids) != 2 || ids[0] != again.ID || ids[1] != md.ID || page.NextCursor == "" {
			t.Fatalf("first page %v, next %q", ids, page.NextCursor)
		}
		var rest fileList
		s.do("GET", "/api/v1/files?limit=2&cursor="+page.NextCursor, alice, nil).expect(t, http.StatusOK, &rest)
		if ids := fileIDs(rest); len(ids) != 1 || ids[0] != img.ID || rest.NextCursor != "" {
			t.Fatalf("second page %v, next %q", ids, rest.NextCursor)
		}
		s.do("GET", "/api/v1/files?cursor=garbage", alice, nil).expectError(t, http.StatusBadRequest, "bad_cursor")

		// Deleted: gone from every route, its twin untouched.
		s.do("DELETE", "/api/v1/files/"+img.ID, alice, nil).expect(t, http.StatusNoContent, nil)
		s.do("GET", "/api/v1/files/"+img.ID, alice, nil).expectError(t, http.StatusNotFound, "not_found")
		s.do("GET", "/api/v1/files/"+img.ID+"/content", alice, nil).expectError(t, http.StatusNotFound, "not_found")
		s.do("DELETE", "/api/v1/files/"+img.ID, alice, nil).expectError(t, http.StatusNotFound, "not_found")
		var after fileList
		s.do("GET", "/api/v1/files", alice, nil).expect(t, http.StatusOK, &after)
		if ids := fileIDs(after); len(ids) != 2 || ids[0] != again.ID || ids[1] != md.ID {
			t.Fatalf("files after the delete: %v", ids)
		}
		if res := s.do("GET", "/api/v1/files/"+again.ID+"/content", alice, nil); !bytes.Equal(res.body, pngBytes) {
			t.Fatalf("the twin of a deleted file: %d bytes", len(res.body))
		}
	})
}

func TestFileUploadRefusals(t *testing.T) {
	s := newSQLite(t, filesConfig)
	alice := s.token("alice")
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what, name, declared string
		content              []byte
		status               int
		code                 string
	}{
		{"HTML declared as an image", "cat.png", "image/png", []byte("<!DOCTYPE html><html><script>alert(1)</script></html>"), 415, "unsupported_media_type"},
		{"an executable", "tool.txt", "text/plain", exe[:32<<10], 415, "unsupported_media_type"},
		{"an executable behind 4 KiB of text", "notes.txt", "text/plain",
			append(bytes.Repeat([]byte("just words\n"), 400), exe[:16<<10]...), 415, "unsupported_media_type"},
		{"an empty file", "empty.txt", "text/plain", nil, 400, "invalid_field"},
		{"one byte too many", "big.txt", "text/plain", bytes.Repeat([]byte("a"), 64<<10+1), 413, "file_too_large"},
	} {
		body, ct := form(t, "file", c.name, c.declared, c.content)
		s.postForm(alice, body, ct).expectError(t, c.status, c.code)
	}
	body, ct := form(t, "attachment", "a.txt", "text/plain", []byte("hi"))
	if e := s.postForm(alice, body, ct).expectError(t, http.StatusBadRequest, "invalid_field"); e.Error.Details["field"] != "file" {
		t.Errorf("a form without the file field: %+v", e.Error)
	}
	s.do("POST", "/api/v1/files", alice, map[string]any{"file": "aGk="}).expectError(t, http.StatusUnsupportedMediaType, "unsupported_media_type")
	var l fileList
	s.do("GET", "/api/v1/files", alice, nil).expect(t, http.StatusOK, &l)
	if len(l.Files) != 0 {
		t.Fatalf("refused uploads left files: %v", fileIDs(l))
	}
}

// TestFileUploadTooLargeStopsReading: a body far larger than files.max_bytes
// gets its 413 while the client is still sending, the server having read
// little more than the limit.
func TestFileUploadTooLargeStopsReading(t *testing.T) {
	s := newSQLite(t, filesConfig)
	alice := s.token("alice")
	const total = 64 << 20 // a thousand times the limit
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	sent := make(chan int64, 1)
	go func() {
		var n int64
		defer func() { sent <- n }()
		part, err := mw.CreateFormFile("file", "big.txt")
		if err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("a"), 32<<10)
		for n < total {
			k, err := part.Write(chunk)
			n += int64(k)
			if err != nil {
				return // the transport stopped sending: the answer came
			}
		}
		mw.Close()
		pw.Close()
	}()
	req, err := http.NewRequest("POST", s.url+"/api/v1/files", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	pw.CloseWithError(io.ErrClosedPipe) // stop the writer if it still writes
	n := <-sent
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413; body %s", res.StatusCode, body)
	}
	// What was sent is what the server read plus what the sockets held.
	t.Logf("sent %d bytes of %d before the 413", n, total)
	if n >= total/2 {
		t.Fatalf("the client sent %d of %d bytes before the 413", n, total)
	}
}

func TestFileOwnerIsolation(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s := newOn(t, backend, filesConfig)
		alice, bob := s.token("alice"), s.token("bob")
		f := s.upload(alice, "a.png", "image/png", pngBytes)
		c := s.createChat(alice, map[string]any{"message": []map[string]any{{"type": "text", "text": "see"}, {"type": "file", "file_id": f.ID}}})

		for _, r := range []struct{ method, path string }{
			{"GET", "/api/v1/files/" + f.ID},
			{"GET", "/api/v1/files/" + f.ID + "/content"},
			{"DELETE", "/api/v1/files/" + f.ID},
			{"GET", "/api/v1/chats/" + c.ID + "/files/" + f.ID + "/content"},
		} {
			s.do(r.method, r.path, bob, nil).expectError(t, http.StatusNotFound, "not_found")
		}
		var l fileList
		s.do("GET", "/api/v1/files", bob, nil).expect(t, http.StatusOK, &l)
		if len(l.Files) != 0 {
			t.Fatalf("bob lists %v", fileIDs(l))
		}

		// As a reference in a message: 404, and nothing written.
		ref := []map[string]any{{"type": "text", "text": "mine?"}, {"type": "file", "file_id": f.ID}}
		e := s.do("POST", "/api/v1/chats", bob, map[string]any{"message": ref}).expectError(t, http.StatusNotFound, "not_found")
		if e.Error.Details["field"] != "message[1].file_id" || e.Error.Details["file_id"] != f.ID {
			t.Errorf("error details %v", e.Error.Details)
		}
		bc := s.createChat(bob, map[string]any{"title": "bob's"})
		s.do("POST", "/api/v1/chats/"+bc.ID+"/messages", bob, map[string]any{"content": ref}).expectError(t, http.StatusNotFound, "not_found")
		if chats := s.listChats(bob, ""); len(chats.Chats) != 1 {
			t.Fatalf("bob has %d chats, want 1", len(chats.Chats))
		}
		if msgs := s.messages(bob, bc.ID); len(msgs) != 0 {
			t.Fatalf("a refused message was written: %+v", msgs)
		}
		// Alice's file is whole, and hers.
		if res := s.do("GET", "/api/v1/files/"+f.ID+"/content", alice, nil); !bytes.Equal(res.body, pngBytes) {
			t.Fatalf("alice's content: %d bytes", len(res.body))
		}
	})
}

func TestFilePartsInMessages(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s := newOn(t, backend, filesConfig)
		alice := s.token("alice")
		img := s.upload(alice, "cat.png", "image/png", pngBytes)
		txt := s.upload(alice, "notes.txt", "text/plain", []byte("some notes\n"))
		pdf := s.upload(alice, "paper.pdf", "application/pdf", pdfBytes)
		if pdf.MediaType != "application/pdf" {
			t.Fatalf("the PDF is %q", pdf.MediaType)
		}

		// The echo model takes text and images (its inputs here).
		c := s.createChat(alice, map[string]any{"message": []map[string]any{
			{"type": "text", "text": "look"}, {"type": "file", "file_id": img.ID, "name": "ignored"}}})
		msgs := s.messages(alice, c.ID)
		if len(msgs) != 1 || len(msgs[0].Parts) != 2 {
			t.Fatalf("messages %+v", msgs)
		}
		want := chat.Part{Type: chat.PartFile, FileID: img.ID, MediaType: "image/png", Name: "cat.png"}
		if p := msgs[0].Parts[1]; p.Type != want.Type || p.FileID != want.FileID || p.MediaType != want.MediaType || p.Name != want.Name {
			t.Fatalf("the file part %+v, want %+v", p, want)
		}

		// A PDF to a model without pdf input: 400 before anything is written.
		e := s.do("POST", "/api/v1/chats/"+c.ID+"/messages", alice, map[string]any{"content": []map[string]any{
			{"type": "file", "file_id": pdf.ID}}}).expectError(t, http.StatusBadRequest, "unsupported_input")
		if e.Error.Details["field"] != "content[0]" || e.Error.Details["kind"] != "pdf" || e.Error.Details["model"] != "echo" {
			t.Errorf("error details %v", e.Error.Details)
		}
		s.do("POST", "/api/v1/chats", alice, map[string]any{"message": []map[string]any{
			{"type": "file", "file_id": pdf.ID}}}).expectError(t, http.StatusBadRequest, "unsupported_input")
		if chats := s.listChats(alice, ""); len(chats.Chats) != 1 {
			t.Fatalf("alice has %d chats after refusals, want 1", len(chats.Chats))
		}
		if n := len(s.messages(alice, c.ID)); n != 1 {
			t.Fatalf("%d messages after a refused one, want 1", n)
		}
		// An unknown file: 404 naming the part.
		e = s.do("POST", "/api/v1/chats/"+c.ID+"/messages", alice, map[string]any{"content": []map[string]any{
			{"type": "text", "text": "x"}, {"type": "file", "file_id": "file_nope"}}}).expectError(t, http.StatusNotFound, "not_found")
		if e.Error.Details["field"] != "content[1].file_id" {
			t.Errorf("error details %v", e.Error.Details)
		}
		// A file alone is a message; text files count as text. The chat is
		// busy (pending, no engine here), so it queues.
		var posted struct{ Queued *chat.QueuedMessage }
		s.do("POST", "/api/v1/chats/"+c.ID+"/messages", alice, map[string]any{"content": []map[string]any{
			{"type": "file", "file_id": txt.ID}}}).expect(t, http.StatusAccepted, &posted)
		if posted.Queued == nil || posted.Queued.Parts[0].MediaType != "text/plain" || posted.Queued.Parts[0].Name != "notes.txt" {
			t.Fatalf("posted %+v", posted)
		}

		// Deleted, the image stays readable through the chat that uses it,
		// and through no other.
		s.do("DELETE", "/api/v1/files/"+img.ID, alice, nil).expect(t, http.StatusNoContent, nil)
		res := s.do("GET", "/api/v1/chats/"+c.ID+"/files/"+img.ID+"/content", alice, nil)
		if res.status != http.StatusOK || !bytes.Equal(res.body, pngBytes) || res.header.Get("Content-Security-Policy") == "" {
			t.Fatalf("a deleted attachment through its chat: %d, %d bytes", res.status, len(res.body))
		}
		other := s.createChat(alice, map[string]any{"message": []map[string]any{{"type": "file", "file_id": txt.ID}}})
		if other.Title != "notes.txt" {
			t.Errorf("a chat whose first message is a file alone is titled %q, want its name", other.Title)
		}
		s.do("GET", "/api/v1/chats/"+other.ID+"/files/"+img.ID+"/content", alice, nil).expectError(t, http.StatusNotFound, "not_found")
		s.do("GET", "/api/v1/chats/"+c.ID+"/files/"+pdf.ID+"/content", alice, nil).expectError(t, http.StatusNotFound, "not_found")
		// The queued text file is the chat's too.
		if res := s.do("GET", "/api/v1/chats/"+c.ID+"/files/"+txt.ID+"/content", alice, nil); string(res.body) != "some notes\n" {
			t.Fatalf("a queued attachment through its chat: %d %q", res.status, res.body)
		}
		// A deleted file cannot be attached again.
		s.do("POST", "/api/v1/chats", alice, map[string]any{"message": []map[string]any{
			{"type": "file", "file_id": img.ID}}}).expectError(t, http.StatusNotFound, "not_found")
	})
}

func TestFileQuota(t *testing.T) {
	s := newSQLite(t, filesConfig, func(su *setup) { su.cfg.Quotas.Defaults.MaxFileBytes = 3000 })
	alice, bob := s.token("alice"), s.token("bob")
	first := s.upload(alice, "a.png", "image/png", pngBytes) // 2,025 bytes of 3,000
	other := append(bytes.Clone(pngBytes), 1)
	body, ct := form(t, "file", "b.png", "image/png", other)
	e := s.postForm(alice, body, ct).expectError(t, http.StatusTooManyRequests, "quota_exceeded")
	if e.Error.Details["quota"] != "max_file_bytes" || e.Error.Details["limit"] != float64(3000) {
		t.Errorf("error details %v", e.Error.Details)
	}
	twin := s.upload(alice, "twin.png", "image/png", pngBytes) // the same bytes are stored once: nothing more
	s.upload(bob, "b.png", "image/png", other)                 // every owner has its own
	s.do("DELETE", "/api/v1/files/"+first.ID, alice, nil).expect(t, http.StatusNoContent, nil)
	s.postForm(alice, body, ct).expectError(t, http.StatusTooManyRequests, "quota_exceeded") // its twin keeps the bytes
	s.do("DELETE", "/api/v1/files/"+twin.ID, alice, nil).expect(t, http.StatusNoContent, nil)
	s.upload(alice, "c.png", "image/png", pngBytes) // deleted files no chat uses no longer count
	// A per-owner override takes precedence.
	var q map[string]any
	s.do("PUT", "/api/v1/owners/alice/quotas", s.token("admin"), map[string]any{"max_file_bytes": 0}).expect(t, http.StatusOK, &q)
	s.upload(alice, "d.png", "image/png", pngBytes)
	var l fileList
	s.do("GET", "/api/v1/files", alice, nil).expect(t, http.StatusOK, &l)
	if len(l.Files) != 2 {
		t.Fatalf("alice has %d files, want 2", len(l.Files))
	}
}

// TestAISDKFileParts: a useChat message's file part names an uploaded file
// by its content URL; the chat's messages give it back with its chat's
// attachment URL, which serves it.
func TestAISDKFileParts(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	s := newLive(t, fake, func(su *setup) { su.cfg.Models[0].Inputs = []string{"text", "image"} })
	tok := s.token("alice")
	img := s.upload(tok, "cat.png", "image/png", pngBytes)
	fake.Push(llmtest.Turn{Text: "a cat"})
	_, done := uiChunks(t, s, tok, map[string]any{"id": "files-1", "parley": map[string]any{"title": "t"},
		"messages": []any{map[string]any{"id": "u1", "role": "user", "parts": []any{
			map[string]any{"type": "text", "text": "what is it?"},
			map[string]any{"type": "file", "mediaType": "image/png", "url": s.url + "/api/v1/files/" + img.ID + "/content"}}}}})
	if !done {
		t.Fatal("the stream did not finish")
	}
	c := s.listChats(tok, "?label=ai-sdk-chat:files-1").Chats[0]
	var ui []struct {
		Role  string
		Parts []map[string]any
	}
	s.do("GET", "/api/v1/ai-sdk/chat/"+c.ID+"/messages", tok, nil).expect(t, http.StatusOK, &ui)
	if len(ui) != 2 || len(ui[0].Parts) != 2 || ui[0].Parts[1]["type"] != "file" || ui[0].Parts[1]["filename"] != "cat.png" {
		t.Fatalf("UI messages %+v", ui)
	}
	if res := s.do("GET", ui[0].Parts[1]["url"].(string), tok, nil); !bytes.Equal(res.body, pngBytes) {
		t.Fatalf("the file part's url answers %d, %d bytes", res.status, len(res.body))
	}
	// Data URLs are not uploads.
	r := s.do("POST", "/api/v1/ai-sdk/chat", tok, map[string]any{"id": "files-1", "messages": []any{map[string]any{"id": "u2", "role": "user",
		"parts": []any{map[string]any{"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,iVBORw0KGgo="}}}}})
	if r.status != http.StatusBadRequest {
		t.Fatalf("a data URL: %d %s", r.status, r.body)
	}
}

// TestEchoTakesPDFs: the offline echo model, configured with no inputs,
// takes a PDF: the docs present it as the way to try everything without a
// key.
func TestEchoTakesPDFs(t *testing.T) {
	s := newSQLite(t)
	alice := s.token("alice")
	pdf := s.upload(alice, "paper.pdf", "application/pdf", pdfBytes)
	c := s.createChat(alice, map[string]any{"model": "echo", "message": []map[string]any{
		{"type": "text", "text": "read this"}, {"type": "file", "file_id": pdf.ID}}})
	if msgs := s.messages(alice, c.ID); len(msgs) != 1 || len(msgs[0].Parts) != 2 || msgs[0].Parts[1].FileID != pdf.ID {
		t.Fatalf("messages %+v", msgs)
	}
}
