package client_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
)

// feedEvents reads a feed in the background; the channel closes at its end.
func feedEvents(f *client.FeedStream) <-chan client.FeedEvent {
	out := make(chan client.FeedEvent, 1024)
	go func() {
		defer close(out)
		for f.Next() {
			out <- f.Event()
		}
	}()
	return out
}

// nextFeed returns the next feed event, failing after wait.
func nextFeed(t *testing.T, ch <-chan client.FeedEvent) client.FeedEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the feed ended")
		}
		return ev
	case <-time.After(wait):
		t.Fatal("no feed event")
	}
	panic("unreachable")
}

// TestWatch: the feed delivers the owner's events; a resync from the server
// and a dropped connection each reconnect and deliver one resync event,
// after which events flow again.
func TestWatch(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	var once sync.Once
	s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		handled := false
		if r.URL.Path == "/api/v1/chats/watch" {
			once.Do(func() {
				handled = true
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, ": connected\n\nevent: resync\ndata: {\"kind\":\"resync\"}\n\n")
			})
		}
		return handled
	})
	feed, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Close()
	evs := feedEvents(feed)
	if ev := nextFeed(t, evs); ev.Kind != client.FeedResync {
		t.Fatalf("first event %q, want resync", ev.Kind)
	}
	if n := len(s.requestsTo("/api/v1/chats/watch")); n != 2 {
		t.Fatalf("%d feed requests at the resync, want 2: it comes once subscribed again", n)
	}

	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextFeed(t, evs); ev.Kind != client.FeedCreated || ev.Chat.ID != ch.ID || ev.Chat.Status != client.StatusWaiting {
		t.Fatalf("event %+v, want created", ev)
	}

	s.srv.CloseClientConnections()
	if ev := nextFeed(t, evs); ev.Kind != client.FeedResync {
		t.Fatalf("event after a dropped connection %q, want resync", ev.Kind)
	}
	title := "renamed"
	if _, err := c.UpdateChat(ctx, ch.ID, client.ChatPatch{Title: &title}); err != nil {
		t.Fatal(err)
	}
	if ev := nextFeed(t, evs); ev.Kind != client.FeedTitleChange || ev.Chat.Title != "renamed" {
		t.Fatalf("event %+v, want title_change", ev)
	}
	if err := c.DeleteChat(ctx, ch.ID); err != nil {
		t.Fatal(err)
	}
	if ev := nextFeed(t, evs); ev.Kind != client.FeedDeleted || ev.Chat.ID != ch.ID {
		t.Fatalf("event %+v, want deleted", ev)
	}

	feed.Close()
	for range evs {
	}
	if err := feed.Err(); err != nil {
		t.Errorf("Err after Close = %v", err)
	}
}

// TestWatchBadToken: a refused feed fails at once.
func TestWatchBadToken(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, err := client.New(s.url, "prl_nope").Watch(testCtx(t))
	apiError(t, err, http.StatusUnauthorized, "unauthorized")
}
