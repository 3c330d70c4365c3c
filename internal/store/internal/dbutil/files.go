package dbutil

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// FileIDs returns the ids of the uploaded files parts name, each once, in
// their order: what a message or queued message makes its chat use
// (file_refs). Parts that carry a file by URL name none.
func FileIDs(parts []chat.Part) []string {
	var ids []string
	for _, p := range parts {
		if p.Type == chat.PartFile && p.FileID != "" && !slices.Contains(ids, p.FileID) {
			ids = append(ids, p.FileID)
		}
	}
	return ids
}

// CheckNewFile refuses a file PutFile cannot store.
func CheckNewFile(f *store.File) error {
	switch {
	case f.ID == "" || f.Owner == "" || f.MediaType == "":
		return errors.New("put file: id, owner and media type are required")
	case f.Size < 0:
		return fmt.Errorf("put file %s: negative size %d", f.ID, f.Size)
	}
	if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != f.SHA256 {
		return fmt.Errorf("put file %s: sha256 %q is not 64 lower-case hex digits", f.ID, f.SHA256)
	}
	return nil
}

// WriteChunks reads size bytes from r and hands them to write in chunks of
// store.FileChunkSize (the last one shorter; none for an empty file),
// numbered from 0, reusing one buffer. It fails if r ends early or holds
// more, or if the bytes' sha256 is not sum (hex): a blob is stored under its
// true hash or not at all.
func WriteChunks(r io.Reader, size int64, sum string, write func(seq int, data []byte) error) error {
	h := sha256.New()
	buf := make([]byte, min(size, store.FileChunkSize))
	for seq, left := 0, size; left > 0; seq++ {
		chunk := buf[:min(left, store.FileChunkSize)]
		if _, err := io.ReadFull(r, chunk); err != nil {
			return fmt.Errorf("read chunk %d of the content: %w", seq, err)
		}
		h.Write(chunk)
		if err := write(seq, chunk); err != nil {
			return fmt.Errorf("write chunk %d: %w", seq, err)
		}
		left -= int64(len(chunk))
	}
	if n, _ := io.CopyN(io.Discard, r, 1); n > 0 {
		return fmt.Errorf("the content is longer than its size %d", size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("the content's sha256 is %s, not %s", got, sum)
	}
	return nil
}

// ReadFile reads and closes the content of f that OpenFile returned (with
// err), into one slice.
func ReadFile(f store.File, rc io.ReadCloser, err error) (store.File, []byte, error) {
	if err != nil {
		return store.File{}, nil, err
	}
	defer rc.Close()
	data := make([]byte, f.Size)
	if _, err := io.ReadFull(rc, data); err != nil {
		return store.File{}, nil, fmt.Errorf("read file %s: %w", f.ID, err)
	}
	return f, data, nil
}

// chunkReader reads a stored content a chunk at a time.
type chunkReader struct {
	size  int64
	read  int64 // bytes of the content handed out
	seq   int   // the next chunk to fetch
	buf   []byte
	fetch func(seq int) ([]byte, error)
}

// NewChunkReader returns a reader of a content of size bytes whose chunks
// fetch returns, each fetched when the one before is used up.
func NewChunkReader(size int64, fetch func(seq int) ([]byte, error)) io.ReadCloser {
	return &chunkReader{size: size, fetch: fetch}
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.buf) == 0 {
		if c.read >= c.size {
			return 0, io.EOF
		}
		data, err := c.fetch(c.seq)
		if err != nil {
			return 0, err
		}
		if len(data) == 0 || int64(len(data)) > c.size-c.read {
			return 0, fmt.Errorf("chunk %d has %d bytes, %d left to read", c.seq, len(data), c.size-c.read)
		}
		c.seq++
		c.buf = data
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	c.read += int64(n)
	return n, nil
}

func (c *chunkReader) Close() error {
	c.buf = nil
	return nil
}
