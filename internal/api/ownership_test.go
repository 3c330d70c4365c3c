package api_test

import (
	"net/http"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
)

// checkIsolation checks that owner B (tokB) can neither see nor change A's
// chat through b, and that A's chat is intact afterwards through a.
func checkIsolation(t *testing.T, a, b *server, tokA, tokB string, c chat.Chat) {
	t.Helper()
	p := "/api/v1/chats/" + c.ID
	n := len(a.messages(tokA, c.ID))
	for _, rq := range []struct {
		method, path string
		body         any
	}{
		{"GET", p, nil},
		{"PATCH", p, map[string]any{"title": "mine now"}},
		{"DELETE", p, nil},
		{"GET", p + "/messages", nil},
		{"POST", p + "/messages", map[string]any{"content": "hi", "busy": "interrupt"}},
		{"POST", p + "/interrupt", nil},
		{"POST", p + "/retry", nil},
	} {
		r := b.do(rq.method, rq.path, tokB, rq.body)
		e := r.expectError(t, http.StatusNotFound, "not_found")
		if e.Error.Message != "chat not found" {
			t.Fatalf("%s %s: %q", rq.method, rq.path, e.Error.Message)
		}
	}
	if l := b.listChats(tokB, "?archived=any"); len(l.Chats) != 0 {
		t.Fatalf("B lists A's chats: %v", chatIDs(l.Chats))
	}
	got := a.get(tokA, c.ID)
	if got.Title != c.Title || got.Status != c.Status || len(a.messages(tokA, c.ID)) != n {
		t.Fatalf("A's chat changed: %+v", got)
	}
}

func TestOwnershipIsolation(t *testing.T) {
	s := newSQLite(t)
	tokA, tokB := s.token("alice"), s.token("bob")
	feedB := s.watch(tokB)
	feedA := s.watch(tokA)

	c := s.createChat(tokA, map[string]any{"title": "secret", "message": "hi"})
	s.force(c.ID, nil, toRunning, toError)
	c = s.get(tokA, c.ID)
	checkIsolation(t, s, s, tokA, tokB, c)

	s.do("PATCH", "/api/v1/chats/"+c.ID, tokA, map[string]any{"title": "still secret"}).expect(t, http.StatusOK, nil)
	s.do("DELETE", "/api/v1/chats/"+c.ID, tokA, nil).expect(t, http.StatusNoContent, nil)
	feedA.expect(events.KindCreated, c.ID)
	feedA.expect(events.KindTitleChange, c.ID)
	feedA.expect(events.KindDeleted, c.ID)

	// Events of one owner are published before the next request starts, so
	// B's first event being its own proves A's never reached it.
	own := s.createChat(tokB, nil)
	feedB.expect(events.KindCreated, own.ID)
}
