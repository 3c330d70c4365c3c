package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// File is an uploaded file's metadata. The server finds MediaType in the
// bytes (an image, a PDF, plain text, Markdown, JSON or CSV), not in the
// name; SHA256 is the hex digest of the content.
type File struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	MediaType string    `json:"media_type"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
}

// FilePage is one page of the owner's files; NextCursor is "" on the last
// page.
type FilePage struct {
	Files      []File `json:"files"`
	NextCursor string `json:"next_cursor"`
}

// ListFilesOptions pages GET /api/v1/files.
type ListFilesOptions struct {
	Limit  int    // 0: the server's default
	Cursor string // NextCursor of the previous page
}

// TextPart is a text part of a message's content.
func TextPart(text string) Part { return Part{Type: PartText, Text: text} }

// FilePart is a part of a message's content that attaches the uploaded
// file id: send it in CreateChatRequest.Message or PostMessageRequest.Content
// with the message's text parts, like []Part{TextPart("What is this?"),
// FilePart(f.ID)}. A file the chat's model cannot take (an image for a
// text-only model) is refused with a 400 when the message is sent.
func FilePart(id string) Part { return Part{Type: PartFile, FileID: id} }

func filePath(id string, sub ...string) string {
	p := v1 + "/files/" + url.PathEscape(id)
	for _, s := range sub {
		p += "/" + s
	}
	return p
}

// UploadFile uploads the content read from r as a file called name. The
// content streams to the server as it is read, never held whole in memory.
// A file over the server's size limit (files.max_bytes) is a 413 error, a
// kind of file the server does not take a 415, a full storage quota a
// 429 "quota_exceeded"; each is an *APIError.
func (c *Client) UploadFile(ctx context.Context, name string, r io.Reader) (File, error) {
	const path = v1 + "/files"
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	req, err := c.request(ctx, http.MethodPost, path, nil, nil)
	if err != nil {
		return File{}, err
	}
	req.Body = pr
	req.ContentLength = -1
	req.Header.Set("Content-Type", mw.FormDataContentType())
	done := make(chan struct{})
	go func() {
		defer close(done)
		part, err := mw.CreateFormFile("file", name)
		if err == nil {
			_, err = io.Copy(part, r)
		}
		if err == nil {
			err = mw.Close()
		}
		// An error here ends the request; nil ends the body.
		pw.CloseWithError(err)
	}()
	res, err := c.http.Do(req)
	// When the server answered before it read everything (a 413), the
	// writer's next write fails; r is not read after UploadFile returns.
	defer func() {
		pr.CloseWithError(io.ErrClosedPipe)
		<-done
	}()
	if err != nil {
		return File{}, fmt.Errorf("upload %s: %w", name, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return File{}, fmt.Errorf("upload %s: %w", name, decodeError(res))
	}
	var f File
	if err := json.NewDecoder(res.Body).Decode(&f); err != nil {
		return File{}, fmt.Errorf("upload %s: decode the answer: %w", name, err)
	}
	return f, nil
}

// GetFile reads a file's metadata.
func (c *Client) GetFile(ctx context.Context, id string) (File, error) {
	var f File
	err := c.do(ctx, http.MethodGet, filePath(id), nil, nil, &f)
	return f, err
}

// FileContent opens a file's content; the caller closes it. The
// ReadCloser reads the bytes as the server sends them.
func (c *Client) FileContent(ctx context.Context, id string) (io.ReadCloser, error) {
	path := filePath(id, "content")
	req, err := c.request(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		return nil, fmt.Errorf("GET %s: %w", path, decodeError(res))
	}
	return res.Body, nil
}

// ListFiles lists one page of the owner's files.
func (c *Client) ListFiles(ctx context.Context, opts ListFilesOptions) (FilePage, error) {
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	var p FilePage
	err := c.do(ctx, http.MethodGet, v1+"/files", q, nil, &p)
	return p, err
}

// DeleteFile deletes a file. The messages that attached it keep it: it
// stays readable through their chats.
func (c *Client) DeleteFile(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, filePath(id), nil, nil, nil)
}
