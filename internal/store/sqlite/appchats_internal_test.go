package sqlite

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
)

// TestAppChatsBackfill: the migration that adds app_chats binds each app
// chat id the AI SDK route had labelled to one chat: the newest that is
// not a fork, per owner.
func TestAppChatsBackfill(t *testing.T) {
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
	if _, err := p.UpTo(ctx, 11); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO owners (name, created_at) VALUES ('alice', 0), ('bob', 0)`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id, owner, labels string
		created           int
	}{
		{"a-old", "alice", `{"ai-sdk-chat":"x","api":"ai-sdk"}`, 1},
		{"a-fork", "alice", `{"ai-sdk-chat":"x","forked_from":"a-old"}`, 3},
		{"a-y1", "alice", `{"ai-sdk-chat":"y"}`, 1},
		{"a-y2", "alice", `{"ai-sdk-chat":"y"}`, 2},
		{"b-x", "bob", `{"ai-sdk-chat":"x"}`, 1},
		{"b-none", "bob", `{}`, 1},
	} {
		if _, err := s.write.ExecContext(ctx, `INSERT INTO chats (id, owner, model, status, labels, created_at, updated_at)
			VALUES (?, ?, 'm', 'waiting', ?, ?, ?)`, c.id, c.owner, c.labels, c.created, c.created); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ owner, app, chat string }{{"alice", "x", "a-old"}, {"alice", "y", "a-y2"}, {"bob", "x", "b-x"}} {
		if got, err := s.AppChat(ctx, w.owner, w.app); err != nil || got != w.chat {
			t.Errorf("%s's %s = %q, %v; want %s", w.owner, w.app, got, err, w.chat)
		}
	}
}
