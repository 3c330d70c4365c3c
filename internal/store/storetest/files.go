package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var fileTests = map[string]func(*testing.T, opener){
	"PutGetAndRead":              testFilePutGetRead,
	"EmptyFile":                  testFileEmpty,
	"SameBytesStoredOnce":        testFileSameBytesOnce,
	"OwnerIsolation":             testFileOwnerIsolation,
	"DeleteKeepsContent":         testFileDelete,
	"ListPages":                  testFileList,
	"BadContentWritesNothing":    testFileBadContent,
	"UnknownOwnerAndDuplicateID": testFilePutRefused,
	"ChatUsesFile":               testChatUsesFile,
	"PurgeWhatNothingUses":       testFilePurge,
	"QuotaCountsStoredBytes":     testFileQuota,
	"QuotaUnderRaces":            testFileQuotaRaces,
}

// fileOf returns a new file of owner holding content, ready for PutFile.
func fileOf(owner, id string, content []byte) store.File {
	sum := sha256.Sum256(content)
	return store.File{ID: id, Owner: owner, Name: id + ".bin", MediaType: "application/octet-stream",
		Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
}

// putFile stores a file of owner with content and returns it as PutFile
// left it.
func putFile(t *testing.T, s store.Store, owner, id string, content []byte) store.File {
	t.Helper()
	f := fileOf(owner, id, content)
	if err := s.PutFile(t.Context(), &f, bytes.NewReader(content), 0); err != nil {
		t.Fatalf("PutFile(%s): %v", id, err)
	}
	return f
}

// pattern returns n bytes that differ from chunk to chunk.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i/store.FileChunkSize) ^ seed
	}
	return b
}

// readAll reads the owner's file through OpenFile and FileData and fails
// unless both give want.
func wantContent(t *testing.T, s store.Store, owner, id string, want []byte) {
	t.Helper()
	_, data, err := s.FileData(t.Context(), owner, id)
	if err != nil {
		t.Fatalf("FileData(%s): %v", id, err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("FileData(%s): %d bytes, not the %d stored", id, len(data), len(want))
	}
	_, rc, err := s.OpenFile(t.Context(), owner, id)
	if err != nil {
		t.Fatalf("OpenFile(%s): %v", id, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read OpenFile(%s): %v", id, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("OpenFile(%s): %d bytes, not the %d stored", id, len(got), len(want))
	}
}

func testFilePutGetRead(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	content := pattern(2*store.FileChunkSize+123, 1) // three chunks, the last short
	before := now()
	f := putFile(t, s, "alice", "file_a", content)
	if f.CreatedAt.Before(before) || f.Deleted {
		t.Fatalf("PutFile left %+v", f)
	}
	got, err := s.GetFile(t.Context(), "alice", "file_a")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "GetFile", got, f)
	meta, _, err := s.FileData(t.Context(), "alice", "file_a")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "FileData's file", meta, f)
	wantContent(t, s, "alice", "file_a", content)
	if n, err := s.OwnerFileBytes(t.Context(), "alice"); err != nil || n != int64(len(content)) {
		t.Fatalf("OwnerFileBytes = %d, %v; want %d", n, err, len(content))
	}
}

func testFileEmpty(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	putFile(t, s, "alice", "file_empty", nil)
	wantContent(t, s, "alice", "file_empty", []byte{})
}

// unreadable fails the test if it is read.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("the content of bytes the owner has already was read")
	return 0, errors.New("read")
}

func testFileSameBytesOnce(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	content := pattern(store.FileChunkSize+5, 2)
	first := putFile(t, s, "alice", "file_1", content)
	second := fileOf("alice", "file_2", content)
	second.Name = "other name.bin"
	if err := s.PutFile(t.Context(), &second, unreadable{t}, 0); err != nil {
		t.Fatalf("PutFile of the same bytes again: %v", err)
	}
	if second.SHA256 != first.SHA256 {
		t.Fatalf("sha256 %s and %s", first.SHA256, second.SHA256)
	}
	wantContent(t, s, "alice", "file_1", content)
	wantContent(t, s, "alice", "file_2", content)
	// Deleting one of them leaves the other whole.
	if err := s.DeleteFile(t.Context(), "alice", "file_1"); err != nil {
		t.Fatal(err)
	}
	wantContent(t, s, "alice", "file_2", content)
	// Another owner's bytes are stored apart: its content is read.
	putFile(t, s, "bob", "file_3", content)
	wantContent(t, s, "bob", "file_3", content)
	// The quota counts the bytes once.
	if n, err := s.OwnerFileBytes(t.Context(), "alice"); err != nil || n != int64(len(content)) {
		t.Fatalf("OwnerFileBytes(alice) = %d, %v; want %d", n, err, len(content))
	}
}

func testFileOwnerIsolation(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	putFile(t, s, "alice", "file_a", []byte("alice's"))
	ctx := t.Context()
	_, err := s.GetFile(ctx, "bob", "file_a")
	wantErr(t, "GetFile of another owner's", err, store.ErrNotFound)
	_, _, err = s.FileData(ctx, "bob", "file_a")
	wantErr(t, "FileData of another owner's", err, store.ErrNotFound)
	_, _, err = s.OpenFile(ctx, "bob", "file_a")
	wantErr(t, "OpenFile of another owner's", err, store.ErrNotFound)
	wantErr(t, "DeleteFile of another owner's", s.DeleteFile(ctx, "bob", "file_a"), store.ErrNotFound)
	_, err = s.GetFile(ctx, "alice", "file_nope")
	wantErr(t, "GetFile of an unknown id", err, store.ErrNotFound)
	_, _, err = s.FileData(ctx, "alice", "file_nope")
	wantErr(t, "FileData of an unknown id", err, store.ErrNotFound)
	page, err := s.ListFiles(ctx, store.FileQuery{Owner: "bob"})
	if err != nil || len(page.Files) != 0 {
		t.Fatalf("bob's files: %+v, %v", page.Files, err)
	}
	if n, err := s.OwnerFileBytes(ctx, "bob"); err != nil || n != 0 {
		t.Fatalf("OwnerFileBytes(bob) = %d, %v", n, err)
	}
	wantContent(t, s, "alice", "file_a", []byte("alice's"))
}

func testFileDelete(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	keep := putFile(t, s, "alice", "file_keep", []byte("keep"))
	putFile(t, s, "alice", "file_gone", []byte("gone"))
	c := addChat(t, s, chat.Chat{})
	useFile(t, s, c.ID, "file_gone")
	ctx := t.Context()
	if err := s.DeleteFile(ctx, "alice", "file_gone"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "deleting again", s.DeleteFile(ctx, "alice", "file_gone"), store.ErrNotFound)
	page, err := s.ListFiles(ctx, store.FileQuery{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the list after the delete", page.Files, []store.File{keep})
	got, err := s.GetFile(ctx, "alice", "file_gone")
	if err != nil || !got.Deleted {
		t.Fatalf("GetFile of a deleted file: %+v, %v; want it marked deleted", got, err)
	}
	// The chat that uses it still reads it, and its bytes still count.
	wantContent(t, s, "alice", "file_gone", []byte("gone"))
	if n, err := s.OwnerFileBytes(ctx, "alice"); err != nil || n != 8 {
		t.Fatalf("OwnerFileBytes = %d, %v; want 8", n, err)
	}
}

func testFileList(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	var want []store.File
	for i := range 5 {
		clockPast(t, now())
		want = append([]store.File{putFile(t, s, "alice", fmt.Sprintf("file_%d", i), []byte{byte(i)})}, want...)
	}
	var got []store.File
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more pages than files")
		}
		page, err := s.ListFiles(t.Context(), store.FileQuery{Owner: "alice", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page.Files...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	wantEqual(t, "files, newest first", got, want)
	for _, cursor := range append([]string{"nonsense"}, forgedCursors()...) {
		_, err := s.ListFiles(t.Context(), store.FileQuery{Owner: "alice", Cursor: cursor})
		wantErr(t, fmt.Sprintf("cursor %q", cursor), err, store.ErrBadCursor)
	}
}

func testFileBadContent(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	content := pattern(store.FileChunkSize+10, 3)
	ctx := t.Context()
	for name, r := range map[string]io.Reader{
		"short":        bytes.NewReader(content[:len(content)-1]),
		"long":         io.MultiReader(bytes.NewReader(content), bytes.NewReader([]byte("x"))),
		"other sha256": bytes.NewReader(pattern(len(content), 4)),
	} {
		f := fileOf("alice", "file_bad", content)
		if err := s.PutFile(ctx, &f, r, 0); err == nil {
			t.Fatalf("PutFile with %s content: no error", name)
		}
		_, err := s.GetFile(ctx, "alice", "file_bad")
		wantErr(t, "GetFile after a refused PutFile ("+name+")", err, store.ErrNotFound)
	}
	bad := fileOf("alice", "file_x", content)
	bad.SHA256 = "ABC"
	if err := s.PutFile(ctx, &bad, bytes.NewReader(content), 0); err == nil {
		t.Fatal("PutFile with a malformed sha256: no error")
	}
	// Nothing of the refused writes stands in the way of the right one.
	putFile(t, s, "alice", "file_bad", content)
	wantContent(t, s, "alice", "file_bad", content)
}

func testFilePutRefused(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	f := fileOf("nobody", "file_n", []byte("x"))
	wantErr(t, "PutFile of an unknown owner", s.PutFile(t.Context(), &f, bytes.NewReader([]byte("x")), 0), store.ErrNotFound)
	putFile(t, s, "alice", "file_1", []byte("one"))
	dup := fileOf("alice", "file_1", []byte("two"))
	wantErr(t, "PutFile of a duplicate id", s.PutFile(t.Context(), &dup, bytes.NewReader([]byte("two")), 0), store.ErrExists)
	wantContent(t, s, "alice", "file_1", []byte("one"))
}

func testChatUsesFile(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	putFile(t, s, "alice", "file_1", []byte("one"))
	putFile(t, s, "alice", "file_2", []byte("two"))
	uses := addChat(t, s, chat.Chat{})
	other := addChat(t, s, chat.Chat{})
	queued := addChat(t, s, chat.Chat{})
	part := chat.Part{Type: chat.PartFile, FileID: "file_1", MediaType: "application/octet-stream", Name: "one"}
	inTx(t, s, func(tx store.Tx) error {
		m := chat.Message{ChatID: uses.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("look"), part}}
		if err := tx.InsertMessage(t.Context(), &m); err != nil {
			return err
		}
		o := chat.Message{ChatID: other.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("file_1")}}
		if err := tx.InsertMessage(t.Context(), &o); err != nil {
			return err
		}
		return tx.InsertQueued(t.Context(), &chat.QueuedMessage{ChatID: queued.ID, Parts: []chat.Part{part}})
	})
	for _, c := range []struct {
		chat, file string
		want       bool
	}{
		{uses.ID, "file_1", true},
		{uses.ID, "file_2", false},
		{other.ID, "file_1", false}, // the id in a text is no reference
		{queued.ID, "file_1", true},
		{"no-such-chat", "file_1", false},
	} {
		got, err := s.ChatUsesFile(t.Context(), c.chat, c.file)
		if err != nil || got != c.want {
			t.Errorf("ChatUsesFile(%s, %s) = %v, %v; want %v", c.chat, c.file, got, err, c.want)
		}
	}
}
