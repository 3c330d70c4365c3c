package api

import (
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/files"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// multipartOverhead is what an upload's body may hold besides the file's
// bytes: boundaries, part headers, small other fields.
const multipartOverhead = 64 << 10

// defaultFilePage is the page size of GET /api/v1/files.
const defaultFilePage = 50

// fileContentCSP keeps a served file from running anything or loading
// anything, should a browser render it.
const fileContentCSP = "default-src 'none'; sandbox"

// fileList is the body of GET /api/v1/files.
type fileList struct {
	Files      []store.File `json:"files"`
	NextCursor string       `json:"next_cursor"`
}

// uploadFile stores the file of the multipart/form-data field "file",
// streamed from the body as it arrives: its bytes go to a temporary file,
// and one byte past files.max_bytes ends the request with 413, the rest of
// the body unread. The body's limit is files.max_bytes plus the multipart
// overhead, not limits.max_body_bytes.
func (a *api) uploadFile(w http.ResponseWriter, r *http.Request, owner string) error {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Message: `an upload is multipart/form-data with the file in the field "file"`}
	}
	body := http.MaxBytesReader(w, r.Body, a.cfg.Files.MaxBytes+multipartOverhead)
	mr := multipart.NewReader(body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return &apiError{Status: http.StatusBadRequest, Code: "invalid_field",
				Message: `the form has no field "file"`, Details: map[string]any{"field": "file"}}
		}
		if err != nil {
			return uploadReadError(&files.ReadError{Err: err}, a.cfg.Files.MaxBytes)
		}
		if part.FormName() != "file" {
			continue // NextPart skips the rest of this part
		}
		f, err := a.svc.UploadFile(r.Context(), owner, part.FileName(), part)
		if err != nil {
			return uploadReadError(err, a.cfg.Files.MaxBytes)
		}
		writeJSON(w, http.StatusCreated, f)
		return nil
	}
}

// uploadReadError turns a failure to read an upload's body into the
// client's error: a body past its limit is a 413 like a file past
// files.max_bytes; a malformed form or a body that broke off a 400.
func uploadReadError(err error, max int64) error {
	var (
		tooBig *http.MaxBytesError
		read   *files.ReadError
	)
	switch {
	case errors.As(err, &tooBig):
		return fileError(&files.TooLargeError{Limit: max})
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &read):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Message: "could not read the upload: " + read.Err.Error()}
	}
	return err
}

func (a *api) getFile(w http.ResponseWriter, r *http.Request, owner string) error {
	f, err := a.svc.GetFile(r.Context(), owner, r.PathValue("file_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

func (a *api) listFiles(w http.ResponseWriter, r *http.Request, owner string) error {
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"), defaultFilePage)
	if err != nil {
		return err
	}
	page, err := a.svc.ListFiles(r.Context(), owner, q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fileList{Files: page.Files, NextCursor: page.NextCursor})
	return nil
}

func (a *api) deleteFile(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := a.svc.DeleteFile(r.Context(), owner, r.PathValue("file_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *api) fileContent(w http.ResponseWriter, r *http.Request, owner string) error {
	f, rc, err := a.svc.OpenFile(r.Context(), owner, r.PathValue("file_id"))
	if err != nil {
		return err
	}
	defer rc.Close()
	a.serveFile(w, r, f, rc)
	return nil
}

// chatFileContent serves a file a message of the owner's chat uses, also
// once the file was deleted: an attachment stays with its chat.
func (a *api) chatFileContent(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	f, rc, err := a.svc.OpenChatFile(r.Context(), owner, id, r.PathValue("file_id"))
	if err != nil {
		return err
	}
	defer rc.Close()
	a.serveFile(w, r, f, rc)
	return nil
}

// serveFile writes a file's bytes as they are read from the store, a chunk
// at a time, under headers that keep a browser from taking them for
// anything but what they are: the stored media type, no sniffing, a
// sandbox, and a download unless the file is an image.
func (a *api) serveFile(w http.ResponseWriter, r *http.Request, f store.File, content io.Reader) {
	h := w.Header()
	ct := f.MediaType
	if chat.FileKindOf(ct) == chat.FileText {
		ct += "; charset=utf-8"
	}
	disposition := "attachment"
	if files.IsImage(f.MediaType) {
		disposition = "inline"
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.FormatInt(f.Size, 10))
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": f.Name}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", fileContentCSP)
	h.Set("Cache-Control", "private, no-cache")
	h.Set("ETag", `"`+f.SHA256+`"`)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, content); err != nil && r.Context().Err() == nil {
		// The status is sent: the answer ends short of its Content-Length,
		// so the client sees it broke off.
		a.log.Error("serve file: the content broke off", "file", f.ID, "err", err)
	}
}

// fileError maps the errors of files to the client's, nil for others.
func fileError(err error) *apiError {
	var (
		nf *service.FileNotFoundError
		in *service.InputError
		tl *files.TooLargeError
		un *files.UnsupportedError
	)
	switch {
	case errors.As(err, &nf):
		d := map[string]any{"file_id": nf.ID}
		if nf.Field != "" {
			d["field"] = nf.Field
		}
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: nf.Error(), Details: d}
	case errors.As(err, &in):
		return &apiError{Status: http.StatusBadRequest, Code: "unsupported_input", Message: in.Error(),
			Details: map[string]any{"field": in.Field, "file_id": in.FileID, "model": in.Model, "kind": in.Kind, "inputs": in.Inputs}}
	case errors.As(err, &tl):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "file_too_large", Message: tl.Error(),
			Details: map[string]any{"limit": tl.Limit}}
	case errors.As(err, &un):
		return &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Message: un.Error(),
			Details: map[string]any{"detected": un.Detected}}
	case errors.Is(err, files.ErrEmpty):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_field", Message: files.ErrEmpty.Error(),
			Details: map[string]any{"field": "file"}}
	}
	return nil
}
