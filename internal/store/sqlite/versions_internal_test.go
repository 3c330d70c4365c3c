package sqlite

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
)

// TestMessageParentsBackfill: the migration that adds parent_id gives
// every message superseded before it the message it most likely followed:
// the message before it, or, for an answer after a superseded answer (a
// regeneration), the last message of the history before it; compactions
// are never a parent; messages of the history get none.
func TestMessageParentsBackfill(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "parley.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.write, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO owners (name, created_at) VALUES ('alice', 0);
		INSERT INTO chats (id, owner, model, status, created_at, updated_at) VALUES ('c', 'alice', 'm', 'waiting', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	const compaction = `[{"type":"compaction","summary":"s","through_message_id":1}]`
	for _, m := range []struct {
		id                int64
		role, parts       string
		superseded        bool
		compactionThrough any
	}{
		{1, "user", "", false, nil},
		{2, "assistant", "", true, nil},  // regenerated away twice:
		{3, "assistant", "", true, nil},  // both follow 1
		{4, "assistant", "", false, nil}, // (the answer in the history)
		{5, "assistant", compaction, false, 1},
		{6, "user", "", true, nil},      // edited in place, then superseded: follows 4, not the compaction
		{7, "assistant", "", true, nil}, // a call
		{8, "tool", "", true, nil},      // its result
		{9, "assistant", "", true, nil}, // the answer after it
	} {
		parts := m.parts
		if parts == "" {
			parts = fmt.Sprintf(`[{"type":"text","text":"m%d"}]`, m.id)
		}
		if _, err := s.write.ExecContext(ctx, `INSERT INTO messages (id, chat_id, role, parts, created_at, superseded, compaction_through)
			VALUES (?, 'c', ?, ?, 0, ?, ?)`, m.id, m.role, parts, m.superseded, m.compactionThrough); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.ListEveryMessage(ctx, "c", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 9 {
		t.Fatalf("%d messages after the migration, want 9", len(msgs))
	}
	want := map[int64]int64{2: 1, 3: 1, 6: 4, 7: 6, 8: 7, 9: 8}
	for _, m := range msgs {
		w, superseded := want[m.ID]
		switch {
		case !superseded && m.ParentID != nil:
			t.Errorf("message %d of the history got parent %d", m.ID, *m.ParentID)
		case superseded && (m.ParentID == nil || *m.ParentID != w):
			t.Errorf("message %d got parent %v, want %d", m.ID, m.ParentID, w)
		}
	}
}
