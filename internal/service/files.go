package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/files"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
)

// FileIDPrefix starts every file id.
const FileIDPrefix = "file_"

// FileNotFoundError is a file the owner does not have: an unknown id,
// another owner's, or one deleted (except where a message of the chat
// uses it). Field names the request's field when a message named it.
type FileNotFoundError struct {
	ID    string
	Field string
}

func (e *FileNotFoundError) Error() string { return fmt.Sprintf("file %q not found", e.ID) }

// InputError refuses a file part the chat's model cannot take (a model
// entry's inputs).
type InputError struct {
	Field  string // like "content[1]"
	FileID string
	Model  string
	Kind   string   // the file's kind of input: image, pdf
	Inputs []string // what the model takes
}

func (e *InputError) Error() string {
	return fmt.Sprintf("model %q does not take %s input (its inputs: %s); file %s cannot be sent to it",
		e.Model, e.Kind, strings.Join(e.Inputs, ", "), e.FileID)
}

// WithFiles replaces where the Service keeps uploaded files, which is
// otherwise the store itself (the database): the seam an object store
// would use.
func WithFiles(f store.Files) Option {
	return func(s *Service) { s.files = f }
}

// UploadFile stores a file of the owner read from content: at most
// files.max_bytes (a *files.TooLargeError beyond, read no further), of a
// media type sniffed from its bytes (a *files.UnsupportedError for
// others), within the owner's max_file_bytes quota (a *quota.CapError):
// the bytes the owner stores, each once, counted in the transaction that
// stores the file, so uploads that race each other never pass it.
// content is read once, into a temporary file, never held in memory.
func (s *Service) UploadFile(ctx context.Context, owner, name string, content io.Reader) (store.File, error) {
	if name == "" {
		name = "file"
	}
	if err := checkFileName(name); err != nil {
		return store.File{}, err
	}
	limit, used, err := s.fileQuota(ctx, owner)
	if err != nil {
		return store.File{}, err
	}
	capErr := &quota.CapError{Owner: owner, Key: "max_file_bytes", Limit: limit}
	if limit > 0 && used > limit {
		return store.File{}, capErr // refused before a byte is read
	}
	u, err := files.Receive(content, name, s.cfg.Files.MaxBytes, "")
	if err != nil {
		return store.File{}, fmt.Errorf("upload file: %w", err)
	}
	defer u.Close()
	id, err := uuid.NewV7()
	if err != nil {
		return store.File{}, fmt.Errorf("new file id: %w", err)
	}
	f := store.File{ID: FileIDPrefix + strings.ReplaceAll(id.String(), "-", ""), Owner: owner, Name: name,
		MediaType: u.MediaType, Size: u.Size, SHA256: u.SHA256}
	r, err := u.Content()
	if err != nil {
		return store.File{}, err
	}
	err = s.files.PutFile(ctx, &f, r, limit)
	if errors.Is(err, store.ErrCapReached) {
		return store.File{}, capErr
	}
	if err != nil {
		return store.File{}, fmt.Errorf("upload file: %w", err)
	}
	return f, nil
}

// fileQuota returns the owner's max_file_bytes (0: unlimited) and, when
// there is one, the bytes it stores now: an owner already past it (its
// quota was lowered) is refused before its upload is read.
func (s *Service) fileQuota(ctx context.Context, owner string) (limit, used int64, err error) {
	l, err := s.budget.Limits(ctx, s.st, owner)
	if err != nil || l.MaxFileBytes <= 0 {
		return 0, 0, err
	}
	used, err = s.files.OwnerFileBytes(ctx, owner)
	if err != nil {
		return 0, 0, fmt.Errorf("file bytes of %s: %w", owner, err)
	}
	return l.MaxFileBytes, used, nil
}

// checkFileName refuses a name files.CheckName refuses.
func checkFileName(name string) error {
	if err := files.CheckName(name); err != nil {
		return &chat.ValidationError{Field: "file", Message: err.Error()}
	}
	return nil
}

// GetFile returns the owner's file; a *FileNotFoundError for an unknown
// id, another owner's or a deleted one.
func (s *Service) GetFile(ctx context.Context, owner, id string) (store.File, error) {
	f, err := s.files.GetFile(ctx, owner, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && f.Deleted) {
		return store.File{}, &FileNotFoundError{ID: id}
	}
	if err != nil {
		return store.File{}, fmt.Errorf("get file %s: %w", id, err)
	}
	return f, nil
}

// ListFiles returns one page of the owner's files, newest first.
func (s *Service) ListFiles(ctx context.Context, owner, cursor string, limit int) (store.FilePage, error) {
	page, err := s.files.ListFiles(ctx, store.FileQuery{Owner: owner, Cursor: cursor, Limit: limit})
	if err != nil {
		return store.FilePage{}, fmt.Errorf("list files: %w", err)
	}
	return page, nil
}

// DeleteFile deletes the owner's file: it leaves the owner's list and its
// routes. The chats that use it keep it (OpenChatFile, and the model's
// requests); when none does, its bytes are purged and stop counting
// against the quota, unless another file of the owner has the same.
func (s *Service) DeleteFile(ctx context.Context, owner, id string) error {
	err := s.files.DeleteFile(ctx, owner, id)
	if errors.Is(err, store.ErrNotFound) {
		return &FileNotFoundError{ID: id}
	}
	return err
}

// OpenFile returns the owner's file with a reader of its bytes, which the
// caller closes; a *FileNotFoundError as GetFile.
func (s *Service) OpenFile(ctx context.Context, owner, id string) (store.File, io.ReadCloser, error) {
	f, rc, err := s.files.OpenFile(ctx, owner, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.File{}, nil, &FileNotFoundError{ID: id}
	}
	if err != nil {
		return store.File{}, nil, fmt.Errorf("open file %s: %w", id, err)
	}
	if f.Deleted {
		rc.Close()
		return store.File{}, nil, &FileNotFoundError{ID: id}
	}
	return f, rc, nil
}

// OpenChatFile opens a file that a message of the owner's chat uses,
// deleted or not: an attachment stays readable with its chat.
// store.ErrNotFound if the owner has no such chat; a *FileNotFoundError if
// no message of the chat uses the file.
func (s *Service) OpenChatFile(ctx context.Context, owner, chatID, fileID string) (store.File, io.ReadCloser, error) {
	c, err := s.owned(ctx, owner, chatID)
	if err != nil {
		return store.File{}, nil, err
	}
	used, err := s.files.ChatUsesFile(ctx, c.ID, fileID)
	if err != nil {
		return store.File{}, nil, err
	}
	if !used {
		return store.File{}, nil, &FileNotFoundError{ID: fileID}
	}
	f, rc, err := s.files.OpenFile(ctx, c.Owner, fileID)
	if errors.Is(err, store.ErrNotFound) {
		return store.File{}, nil, &FileNotFoundError{ID: fileID}
	}
	if err != nil {
		return store.File{}, nil, fmt.Errorf("open file %s: %w", fileID, err)
	}
	return f, rc, nil
}

// resolveFiles completes the file parts of a user message in place (parts
// from chat.ParseContent): each must name a file of the owner that is not
// deleted (else a *FileNotFoundError naming the part's field under
// field, like "content"), and gets its media type and name.
func (s *Service) resolveFiles(ctx context.Context, owner, field string, parts []chat.Part) error {
	for i := range parts {
		p := &parts[i]
		if p.Type != chat.PartFile {
			continue
		}
		f, err := s.GetFile(ctx, owner, p.FileID)
		if fe, ok := errors.AsType[*FileNotFoundError](err); ok {
			fe.Field = fmt.Sprintf("%s[%d].file_id", field, i)
			return fe
		}
		if err != nil {
			return err
		}
		p.MediaType, p.Name = f.MediaType, f.Name
	}
	return nil
}

// checkInputs refuses, with an *InputError, a file part (resolved) the
// model cannot take.
func (s *Service) checkInputs(model, field string, parts []chat.Part) error {
	m, ok := s.cfg.FindModel(model)
	if !ok {
		return nil // a chat's model that left the configuration fails at its run, as any
	}
	for i, p := range parts {
		if p.Type != chat.PartFile {
			continue
		}
		if kind := chat.FileKindOf(p.MediaType); !m.TakesInput(kind) {
			return &InputError{Field: fmt.Sprintf("%s[%d]", field, i), FileID: p.FileID, Model: model, Kind: kind, Inputs: m.InputKinds()}
		}
	}
	return nil
}
