package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// fileSource serves files from a map, counting its reads.
type fileSource struct {
	files map[string][]byte
	reads int
}

func (s *fileSource) FileData(_ context.Context, owner, id string) (store.File, []byte, error) {
	s.reads++
	data, ok := s.files[owner+"/"+id]
	if !ok {
		return store.File{}, nil, store.ErrNotFound
	}
	return store.File{ID: id, Owner: owner, MediaType: "image/png"}, data, nil
}

func TestWithFilesLoadsBytesForTheCallOnly(t *testing.T) {
	src := &fileSource{files: map[string][]byte{"alice/file_1": []byte("PNGBYTES")}}
	var logs bytes.Buffer
	r := &run{e: &Engine{cfg: Config{Files: src}}, chat: chat.Chat{ID: "c", Owner: "alice"},
		log: slog.New(slog.NewTextHandler(&logs, nil))}
	image := chat.Part{Type: chat.PartFile, FileID: "file_1", MediaType: "image/png", Name: "photo.png"}
	gone := chat.Part{Type: chat.PartFile, FileID: "file_2", MediaType: "image/png", Name: "old.png"}
	msgs := []chat.Message{
		{ID: 1, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("hi")}},
		{ID: 2, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("hello")}},
		{ID: 3, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("look"), image, gone}},
	}
	before := slices.Clone(msgs[2].Parts)

	got := r.withFiles(context.Background(), msgs)
	if len(got) != 3 || len(got[2].Parts) != 3 {
		t.Fatalf("withFiles = %+v", got)
	}
	if p := got[2].Parts[1]; p.Type != chat.PartFile || string(p.Data) != "PNGBYTES" || p.FileID != "file_1" {
		t.Errorf("the file's part = %+v, want its bytes loaded", p)
	}
	if p := got[2].Parts[2]; p.Type != chat.PartText || p.Text != "[file old.png is no longer available]" {
		t.Errorf("a file that cannot be loaded = %+v, want a note", p)
	}
	if !strings.Contains(logs.String(), "file not sent to the model") || !strings.Contains(logs.String(), "file_2") {
		t.Errorf("the missing file was not logged: %s", logs.String())
	}
	for i, p := range msgs[2].Parts {
		if len(p.Data) != 0 || p.Type != before[i].Type {
			t.Errorf("the history's part %d was modified: %+v", i, p)
		}
	}

	// Another step of the run reads the file from the run, not the store.
	reads := src.reads
	again := r.withFiles(context.Background(), msgs)
	if string(again[2].Parts[1].Data) != "PNGBYTES" || src.reads != reads+1 { // only the missing one is asked again
		t.Errorf("second step: data %q, reads %d -> %d", again[2].Parts[1].Data, reads, src.reads)
	}

	// Without files, the messages are returned as they are.
	plain := msgs[:2]
	if out := r.withFiles(context.Background(), plain); &out[0] != &plain[0] {
		t.Error("messages without files were copied")
	}
}

// Another owner's file is not found, and reads as gone.
func TestWithFilesIsOwnerScoped(t *testing.T) {
	src := &fileSource{files: map[string][]byte{"bob/file_1": []byte("x")}}
	r := &run{e: &Engine{cfg: Config{Files: src}}, chat: chat.Chat{ID: "c", Owner: "alice"}, log: slog.New(slog.DiscardHandler)}
	got := r.withFiles(context.Background(), []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{
		{Type: chat.PartFile, FileID: "file_1", Name: "b.png", MediaType: "image/png"}}}})
	if p := got[0].Parts[0]; p.Type != chat.PartText || len(p.Data) != 0 {
		t.Errorf("another owner's file = %+v", p)
	}
	if _, _, err := src.FileData(context.Background(), "alice", "file_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
}

// The title call names a message's files and sends none of them.
func TestTitleNamesFiles(t *testing.T) {
	parts := []chat.Part{chat.TextPart("what is this?"),
		{Type: chat.PartFile, FileID: "file_1", MediaType: "image/png", Name: "cat.png", Data: []byte("x")}}
	got := namedFiles(parts)
	if len(got) != 2 || got[1].Type != chat.PartText || got[1].Text != "[image cat.png]" || parts[1].Type != chat.PartFile {
		t.Fatalf("namedFiles = %+v (input %+v)", got, parts)
	}
}
