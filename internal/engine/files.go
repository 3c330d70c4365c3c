package engine

import (
	"context"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// FileSource reads an owner's stored file, its metadata and bytes; a file
// the owner deleted is still read (a message that uses it keeps it), one
// that does not exist is store.ErrNotFound. The store is one.
type FileSource interface {
	FileData(ctx context.Context, owner, id string) (store.File, []byte, error)
}

// withFiles returns msgs with the bytes of their stored files (file parts
// with a FileID) loaded into the parts, for one model call: msgs and the
// run's history are not modified, and the bytes are never stored. A file
// that cannot be loaded becomes a text part saying so, and the chat goes
// on without it; the failure is logged. Files are read once per run.
func (r *run) withFiles(ctx context.Context, msgs []chat.Message) []chat.Message {
	var out []chat.Message
	for i, m := range msgs {
		if !hasStoredFile(m) {
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if out == nil {
			out = append(make([]chat.Message, 0, len(msgs)), msgs[:i]...)
		}
		parts := make([]chat.Part, len(m.Parts))
		for j, p := range m.Parts {
			if p.Type == chat.PartFile && p.FileID != "" && len(p.Data) == 0 {
				p = r.loadFile(ctx, p)
			}
			parts[j] = p
		}
		m.Parts = parts
		out = append(out, m)
	}
	if out == nil {
		return msgs
	}
	return out
}

// loadFile returns p with its bytes, or the text part that stands for a
// file that cannot be loaded.
func (r *run) loadFile(ctx context.Context, p chat.Part) chat.Part {
	data, ok := r.files[p.FileID]
	if !ok {
		var err error
		if r.e.cfg.Files == nil {
			r.log.Warn("file not sent to the model: the engine has no file source", "file", p.FileID)
			return chat.TextPart(chat.FileUnavailable(p))
		}
		var f store.File
		f, data, err = r.e.cfg.Files.FileData(ctx, r.chat.Owner, p.FileID)
		if err != nil || len(data) == 0 {
			r.log.Warn("file not sent to the model: it could not be loaded", "file", p.FileID, "name", p.Name, "err", err)
			return chat.TextPart(chat.FileUnavailable(p))
		}
		if p.MediaType == "" {
			p.MediaType = f.MediaType
		}
		if r.files == nil {
			r.files = map[string][]byte{}
		}
		r.files[p.FileID] = data
	}
	p.Data = data
	return p
}

// hasStoredFile reports whether m holds a file part naming a stored file.
func hasStoredFile(m chat.Message) bool {
	for _, p := range m.Parts {
		if p.Type == chat.PartFile && p.FileID != "" {
			return true
		}
	}
	return false
}
