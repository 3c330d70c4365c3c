package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// useFile inserts a user message of the chat with a file part naming the
// file.
func useFile(t *testing.T, s store.Store, chatID, fileID string) {
	t.Helper()
	inTx(t, s, func(tx store.Tx) error {
		m := chat.Message{ChatID: chatID, Role: chat.RoleUser,
			Parts: []chat.Part{{Type: chat.PartFile, FileID: fileID, MediaType: "application/octet-stream", Name: fileID}}}
		return tx.InsertMessage(t.Context(), &m)
	})
}

// wantPurged checks that the owner's file is gone and that its bytes are
// no longer stored: a new file of the same bytes has its content read.
func wantPurged(t *testing.T, s store.Store, owner, id string, content []byte) {
	t.Helper()
	_, err := s.GetFile(t.Context(), owner, id)
	wantErr(t, "GetFile of a purged file "+id, err, store.ErrNotFound)
	read := &countingReader{r: bytes.NewReader(content)}
	again := fileOf(owner, id+"_again", content)
	if err := s.PutFile(t.Context(), &again, read, 0); err != nil {
		t.Fatalf("PutFile of %s's bytes again: %v", id, err)
	}
	if read.n != int64(len(content)) {
		t.Fatalf("the bytes of %s are still stored: PutFile of them again read %d of %d", id, read.n, len(content))
	}
	if err := s.DeleteFile(t.Context(), owner, again.ID); err != nil {
		t.Fatal(err)
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r *bytes.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// testFilePurge: a deleted file no chat uses is gone with its bytes at
// once; one a chat uses goes when the last such chat is deleted; bytes
// another file of the owner names stay. Uploading, deleting and uploading
// again leaves nothing behind.
func testFilePurge(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	ctx := t.Context()
	big := pattern(store.FileChunkSize+100, 5)
	for i := range 2 {
		content := append(bytes.Clone(big), byte(i))
		putFile(t, s, "alice", fmt.Sprint("file_round", i), content)
		if err := s.DeleteFile(ctx, "alice", fmt.Sprint("file_round", i)); err != nil {
			t.Fatal(err)
		}
		if n, err := s.OwnerFileBytes(ctx, "alice"); err != nil || n != 0 {
			t.Fatalf("round %d: OwnerFileBytes = %d, %v after the delete; want 0", i, n, err)
		}
		wantPurged(t, s, "alice", fmt.Sprint("file_round", i), content)
	}

	// Two files of the same bytes: deleting one keeps the bytes.
	putFile(t, s, "alice", "file_twin1", []byte("twins"))
	putFile(t, s, "alice", "file_twin2", []byte("twins"))
	if err := s.DeleteFile(ctx, "alice", "file_twin1"); err != nil {
		t.Fatal(err)
	}
	wantContent(t, s, "alice", "file_twin2", []byte("twins"))

	// Used by two chats: kept through the first chat's deletion.
	putFile(t, s, "alice", "file_used", []byte("used"))
	c1, c2 := addChat(t, s, chat.Chat{}), addChat(t, s, chat.Chat{})
	useFile(t, s, c1.ID, "file_used")
	inTx(t, s, func(tx store.Tx) error {
		return tx.InsertQueued(ctx, &chat.QueuedMessage{ChatID: c2.ID,
			Parts: []chat.Part{{Type: chat.PartFile, FileID: "file_used", MediaType: "application/octet-stream"}}})
	})
	if err := s.DeleteFile(ctx, "alice", "file_used"); err != nil {
		t.Fatal(err)
	}
	inTx(t, s, func(tx store.Tx) error { return tx.DeleteChat(ctx, c1.ID) })
	wantContent(t, s, "alice", "file_used", []byte("used"))
	if used, err := s.ChatUsesFile(ctx, c2.ID, "file_used"); err != nil || !used {
		t.Fatalf("ChatUsesFile of the queued message's chat = %v, %v", used, err)
	}
	inTx(t, s, func(tx store.Tx) error { return tx.DeleteChat(ctx, c2.ID) })
	wantPurged(t, s, "alice", "file_used", []byte("used"))
	if n, err := s.OwnerFileBytes(ctx, "alice"); err != nil || n != int64(len("twins")) {
		t.Fatalf("OwnerFileBytes = %d, %v; want %d (the twin)", n, err, len("twins"))
	}
}

// testFileQuota: PutFile refuses, writing nothing, a file whose new bytes
// would pass maxBytes; bytes the owner has already add nothing, also at
// the cap.
func testFileQuota(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	ctx := t.Context()
	putFile(t, s, "alice", "file_1", []byte("0123456789"))
	over := fileOf("alice", "file_2", []byte("abcdef"))
	wantErr(t, "PutFile past the cap", s.PutFile(ctx, &over, bytes.NewReader([]byte("abcdef")), 15), store.ErrCapReached)
	_, err := s.GetFile(ctx, "alice", "file_2")
	wantErr(t, "GetFile of the refused file", err, store.ErrNotFound)
	fits := fileOf("alice", "file_3", []byte("abcde"))
	if err := s.PutFile(ctx, &fits, bytes.NewReader([]byte("abcde")), 15); err != nil {
		t.Fatalf("PutFile up to the cap: %v", err)
	}
	twin := fileOf("alice", "file_4", []byte("abcde"))
	if err := s.PutFile(ctx, &twin, unreadable{t}, 15); err != nil {
		t.Fatalf("PutFile of bytes stored already, at the cap: %v", err)
	}
	if n, err := s.OwnerFileBytes(ctx, "alice"); err != nil || n != 15 {
		t.Fatalf("OwnerFileBytes = %d, %v; want 15", n, err)
	}
}

// testFileQuotaRaces: two uploads that each fit the cap but not together
// never both pass it. Each upload's content, read inside PutFile's
// transaction after its check, waits for the other upload to be reading
// too: checked outside the owner's lock, both pass their checks and meet
// there, and both are stored. Under the lock the second waits for the
// first to commit, so the first reader waits in vain and goes on after
// meetWait; the outcome does not depend on that wait.
func testFileQuotaRaces(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	const size, max = 1000, 1500
	meet := &meeting{both: make(chan struct{})}
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			content := bytes.Repeat([]byte{byte('a' + i)}, size)
			f := fileOf("alice", fmt.Sprint("file_r", i), content)
			errs <- s.PutFile(context.Background(), &f, &meetingReader{r: bytes.NewReader(content), m: meet}, max)
		})
	}
	wg.Wait()
	close(errs)
	stored := 0
	for err := range errs {
		switch {
		case err == nil:
			stored++
		case !errors.Is(err, store.ErrCapReached):
			t.Fatalf("PutFile: %v, want nil or ErrCapReached", err)
		}
	}
	n, err := s.OwnerFileBytes(t.Context(), "alice")
	if err != nil || stored != 1 || n != size {
		t.Fatalf("%d uploads stored, OwnerFileBytes %d, %v; want 1 and %d", stored, n, err, size)
	}
}

// meetWait bounds how long a meetingReader waits for the other.
const meetWait = 300 * time.Millisecond

// meeting is where two readers wait for each other.
type meeting struct {
	mu      sync.Mutex
	arrived int
	both    chan struct{} // closed when the second arrives
}

// meetingReader waits, at its first read, until the other reader of its
// meeting reads too (or meetWait passed).
type meetingReader struct {
	r       *bytes.Reader
	m       *meeting
	started bool
}

func (r *meetingReader) Read(p []byte) (int, error) {
	if !r.started {
		r.started = true
		r.m.mu.Lock()
		if r.m.arrived++; r.m.arrived == 2 {
			close(r.m.both)
		}
		r.m.mu.Unlock()
		select {
		case <-r.m.both:
		case <-time.After(meetWait):
		}
	}
	return r.r.Read(p)
}
