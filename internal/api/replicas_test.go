package api_test

import (
	"crypto/rand"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// newPostgres starts one replica on the database of dsn: its own store
// pool, its own LISTEN connection on channel, its own API and HTTP server.
func newPostgres(t *testing.T, dsn, channel string, opts ...func(*setup)) *server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, ps := pgtest.Replica(t, dsn, channel, log)
	s := setup{cfg: testConfig(), keepAlive: time.Hour}
	for _, o := range opts {
		o(&s)
	}
	return start(t, st, ps, s)
}

// TestReplicasShareOnePostgres runs two API instances on one database, as
// two `parley serve` processes would, and checks that the owner feed crosses
// from one to the other and that ownership holds on both.
func TestReplicasShareOnePostgres(t *testing.T) {
	dsn := pgtest.Migrated(t)
	// NOTIFY channels are database-wide: one per test keeps parallel runs apart.
	channel := "parley_test_" + strings.ToLower(rand.Text()[:10])
	a := newPostgres(t, dsn, channel)
	b := newPostgres(t, dsn, channel)
	tokA, tokB := a.token("alice"), a.token("bob")

	aliceOnB := b.watch(tokA)
	aliceOnA := a.watch(tokA)
	bobOnB := b.watch(tokB)

	// Changes made through A reach a watcher connected to B, in order.
	c := a.createChat(tokA, map[string]any{"title": "Paris"})
	if ev := aliceOnB.expect(events.KindCreated, c.ID); ev.Chat.Title != "Paris" || ev.Chat.Owner != "alice" {
		t.Fatalf("created on B: %+v", ev.Chat)
	}
	a.do("PATCH", "/api/v1/chats/"+c.ID, tokA, map[string]any{"title": "Rome"}).expect(t, http.StatusOK, nil)
	if ev := aliceOnB.expect(events.KindTitleChange, c.ID); ev.Chat.Title != "Rome" {
		t.Fatalf("title_change on B: %+v", ev.Chat)
	}
	a.do("POST", "/api/v1/chats/"+c.ID+"/messages", tokA, map[string]any{"content": "hi"}).expect(t, http.StatusAccepted, nil)
	if ev := aliceOnB.expect(events.KindStatusChange, c.ID); ev.Chat.Status != chat.Pending {
		t.Fatalf("status_change on B: %+v", ev.Chat)
	}

	// B serves A's chat to its owner, and to nobody else.
	got := b.get(tokA, c.ID)
	if got.Title != "Rome" || got.Status != chat.Pending || len(b.messages(tokA, c.ID)) != 1 {
		t.Fatalf("B serves %+v", got)
	}
	checkIsolation(t, a, b, tokA, tokB, got)
	checkIsolation(t, b, a, tokA, tokB, got)

	// And back: a change through B reaches the watcher on A.
	b.do("DELETE", "/api/v1/chats/"+c.ID, tokA, nil).expect(t, http.StatusNoContent, nil)
	aliceOnA.expect(events.KindCreated, c.ID)
	aliceOnA.expect(events.KindTitleChange, c.ID)
	aliceOnA.expect(events.KindStatusChange, c.ID)
	aliceOnA.expect(events.KindDeleted, c.ID)
	aliceOnB.expect(events.KindDeleted, c.ID)

	// Bob's feed saw none of Alice's events: its first is its own chat's,
	// created after all of hers.
	own := a.createChat(tokB, nil)
	bobOnB.expect(events.KindCreated, own.ID)
}
