package storetest

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var listTests = map[string]func(*testing.T, opener){
	"NewestFirstAndPaged": testListOrderAndPages,
	"ExactLastPage":       testListExactLastPage,
	"OwnerOnly":           testListOwnerOnly,
	"FilterStatuses":      testListStatuses,
	"FilterLabels":        testListLabels,
	"FilterArchived":      testListArchived,
	"FiltersWithPaging":   testListFiltersPaged,
	"BadCursor":           testListBadCursor,
	"LimitClamped":        testListLimit,
}

// addChats stores n chats of owner in one transaction, each made by mk.
func addChats(t *testing.T, s store.Store, owner string, n int, mk func(i int) chat.Chat) []chat.Chat {
	t.Helper()
	out := make([]chat.Chat, n)
	inTx(t, s, func(tx store.Tx) error {
		for i := range n {
			c := chat.Chat{}
			if mk != nil {
				c = mk(i)
			}
			if c.ID == "" {
				c.ID = fmt.Sprintf("%s-%04d", owner, i)
			}
			c.Owner, c.Model = owner, "m"
			if c.Status == "" {
				c.Status = chat.Waiting
			}
			if err := insertAs(t.Context(), tx, &c); err != nil {
				return err
			}
			out[i] = c
		}
		return nil
	})
	return out
}

// newestFirst sorts chats as ListChats must: created_at desc, then id desc.
func newestFirst(cs []chat.Chat) []chat.Chat {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b chat.Chat) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return cs
}

// listAll pages through q with limit per page and returns every chat and
// the number of pages.
func listAll(t *testing.T, s store.Reader, q store.ChatQuery) ([]chat.Chat, int) {
	t.Helper()
	var all []chat.Chat
	for pages := 1; ; pages++ {
		page, err := s.ListChats(t.Context(), q)
		if err != nil {
			t.Fatalf("ListChats page %d: %v", pages, err)
		}
		if len(page.Chats) > q.Limit {
			t.Fatalf("page %d has %d chats, limit %d", pages, len(page.Chats), q.Limit)
		}
		all = append(all, page.Chats...)
		if page.NextCursor == "" {
			return all, pages
		}
		if len(page.Chats) != q.Limit {
			t.Fatalf("page %d: %d chats and a next cursor; want a full page", pages, len(page.Chats))
		}
		if pages > 100 {
			t.Fatal("ListChats does not end")
		}
		q.Cursor = page.NextCursor
	}
}

func ids(cs []chat.Chat) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func testListOrderAndPages(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	// Several transactions, so several creation times; ids chosen so that
	// id order differs from insertion order within one time.
	var want []chat.Chat
	for _, batch := range [][]string{{"b", "a", "c"}, {"e"}, {"d", "g", "f"}} {
		want = append(want, addChats(t, s, "alice", len(batch), func(i int) chat.Chat { return chat.Chat{ID: batch[i]} })...)
	}
	want = newestFirst(want)

	page, err := s.ListChats(t.Context(), store.ChatQuery{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "one page", ids(page.Chats), ids(want))
	wantEqual(t, "chats as stored", page.Chats, want)
	if page.NextCursor != "" {
		t.Fatalf("NextCursor %q on the only page", page.NextCursor)
	}
	for _, limit := range []int{1, 2, 3} {
		got, pages := listAll(t, s, store.ChatQuery{Owner: "alice", Limit: limit})
		wantEqual(t, fmt.Sprintf("pages of %d", limit), ids(got), ids(want))
		if wantPages := (len(want) + limit - 1) / limit; pages != wantPages {
			t.Fatalf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}
}

func testListExactLastPage(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addChats(t, s, "alice", 4, nil)
	first, err := s.ListChats(t.Context(), store.ChatQuery{Owner: "alice", Limit: 2})
	if err != nil || first.NextCursor == "" {
		t.Fatalf("first page: %v, cursor %q", err, first.NextCursor)
	}
	second, err := s.ListChats(t.Context(), store.ChatQuery{Owner: "alice", Limit: 2, Cursor: first.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Chats) != 2 || second.NextCursor != "" {
		t.Fatalf("last page: %d chats, cursor %q; want 2 chats and no cursor", len(second.Chats), second.NextCursor)
	}
}

func testListOwnerOnly(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	a := addChats(t, s, "alice", 2, nil)
	addChats(t, s, "bob", 3, nil)
	got, _ := listAll(t, s, store.ChatQuery{Owner: "alice", Limit: 10})
	wantEqual(t, "alice's chats", ids(got), ids(newestFirst(a)))
	got, _ = listAll(t, s, store.ChatQuery{Owner: "carol", Limit: 10})
	if len(got) != 0 {
		t.Fatalf("an owner with no chats listed %v", ids(got))
	}
}

func testListStatuses(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	cs := addChats(t, s, "alice", len(chat.Statuses), func(i int) chat.Chat { return chat.Chat{Status: chat.Statuses[i]} })
	for _, statuses := range [][]chat.Status{{chat.Pending}, {chat.Waiting, chat.Error}, chat.Statuses} {
		var want []chat.Chat
		for _, c := range cs {
			if slices.Contains(statuses, c.Status) {
				want = append(want, c)
			}
		}
		got, _ := listAll(t, s, store.ChatQuery{Owner: "alice", Statuses: statuses, Limit: 10})
		wantEqual(t, fmt.Sprint("statuses ", statuses), ids(got), ids(newestFirst(want)))
	}
}

func testListLabels(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	labels := []map[string]string{
		nil,
		{"team": "ops"},
		{"team": "ops", "env": "prod"},
		{"team": "dev", "env": "prod"},
		{"team": "ops", "env": "prod", "extra": "x"},
		{"env": "prod"},
		{"team": "ops.prod"}, // no key/value confusion
	}
	cs := addChats(t, s, "alice", len(labels), func(i int) chat.Chat { return chat.Chat{Labels: labels[i]} })
	for _, tc := range []struct {
		filter map[string]string
		want   []int
	}{
		{map[string]string{"team": "ops"}, []int{1, 2, 4}},
		{map[string]string{"team": "ops", "env": "prod"}, []int{2, 4}},
		{map[string]string{"env": "prod"}, []int{2, 3, 4, 5}},
		{map[string]string{"team": "nobody"}, nil},
		{map[string]string{"missing": ""}, nil},
		{map[string]string{"team": "ops", "env": "dev"}, nil},
	} {
		var want []chat.Chat
		for _, i := range tc.want {
			want = append(want, cs[i])
		}
		got, _ := listAll(t, s, store.ChatQuery{Owner: "alice", Labels: tc.filter, Limit: 10})
		wantEqual(t, fmt.Sprint("labels ", tc.filter), ids(got), ids(newestFirst(want)))
	}
}

func testListArchived(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	cs := addChats(t, s, "alice", 5, func(i int) chat.Chat { return chat.Chat{Archived: i%2 == 0} })
	for _, archived := range []*bool{nil, ptr(true), ptr(false)} {
		var want []chat.Chat
		for _, c := range cs {
			if archived == nil || c.Archived == *archived {
				want = append(want, c)
			}
		}
		got, _ := listAll(t, s, store.ChatQuery{Owner: "alice", Archived: archived, Limit: 10})
		wantEqual(t, fmt.Sprint("archived ", archived), ids(got), ids(newestFirst(want)))
	}
}

func testListFiltersPaged(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	var want []chat.Chat
	for batch := range 3 {
		cs := addChats(t, s, "alice", 6, func(i int) chat.Chat {
			c := chat.Chat{ID: fmt.Sprintf("f%d-%d", batch, i), Status: chat.Statuses[i%3], Archived: i%2 == 1}
			if i%4 != 0 {
				c.Labels = map[string]string{"k": "v"}
			}
			return c
		})
		for _, c := range cs {
			if (c.Status == chat.Waiting || c.Status == chat.Running) && !c.Archived && c.Labels["k"] == "v" {
				want = append(want, c)
			}
		}
	}
	q := store.ChatQuery{Owner: "alice", Statuses: []chat.Status{chat.Waiting, chat.Running},
		Labels: map[string]string{"k": "v"}, Archived: ptr(false), Limit: 2}
	got, _ := listAll(t, s, q)
	wantEqual(t, "filtered pages", ids(got), ids(newestFirst(want)))
}

func testListBadCursor(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addChats(t, s, "alice", 1, nil)
	for _, cursor := range append([]string{"!!!", "Zm9v", "bm90LWEtY3Vyc29y", "%%%", "eyJhIjoxfQ"}, forgedCursors()...) {
		_, err := s.ListChats(t.Context(), store.ChatQuery{Owner: "alice", Cursor: cursor})
		wantErr(t, fmt.Sprintf("cursor %q", cursor), err, store.ErrBadCursor)
	}
}

// forgedCursors are cursors of the stores' own format whose id no store
// issued: one holding a NUL, one not UTF-8, one with a control character
// (PostgreSQL refuses the first two as text).
func forgedCursors() []string {
	var out []string
	for _, id := range []string{"chat_\x00x", "chat_\xff\xfe", "chat_\x1b"} {
		out = append(out, base64.RawURLEncoding.EncodeToString([]byte("c1:1700000000000000:"+id)))
	}
	return out
}

func testListLimit(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addChats(t, s, "alice", store.MaxPageSize+1, nil)
	for _, tc := range []struct{ limit, want int }{
		{0, 50}, {-3, 1}, {1, 1}, {store.MaxPageSize, store.MaxPageSize}, {store.MaxPageSize + 100, store.MaxPageSize},
	} {
		page, err := s.ListChats(t.Context(), store.ChatQuery{Owner: "alice", Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Chats) != tc.want || page.NextCursor == "" {
			t.Fatalf("limit %d: %d chats, cursor %q; want %d and a cursor", tc.limit, len(page.Chats), page.NextCursor, tc.want)
		}
	}
}
