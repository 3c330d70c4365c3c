package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
)

func TestFeedEventsInOrder(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	feed := s.watch(tok)

	c := s.createChat(tok, nil)
	if ev := feed.expect(events.KindCreated, c.ID); ev.Chat.Status != chat.Waiting || ev.Chat.Owner != "alice" {
		t.Fatalf("created: %+v", ev.Chat)
	}
	s.do("PATCH", "/api/v1/chats/"+c.ID, tok, map[string]any{"title": "Paris"}).expect(t, http.StatusOK, nil)
	if ev := feed.expect(events.KindTitleChange, c.ID); ev.Chat.Title != "Paris" {
		t.Fatalf("title_change: %+v", ev.Chat)
	}
	s.do("PATCH", "/api/v1/chats/"+c.ID, tok, map[string]any{"labels": map[string]string{"a": "b"}, "archived": true, "title": "Paris"}).
		expect(t, http.StatusOK, nil) // no title change: no event
	s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, map[string]any{"content": "hi"}).expect(t, http.StatusAccepted, nil)
	if ev := feed.expect(events.KindStatusChange, c.ID); ev.Chat.Status != chat.Pending || !ev.Chat.Archived {
		t.Fatalf("status_change to pending: %+v", ev.Chat)
	}
	s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, map[string]any{"content": "again"}).expect(t, http.StatusAccepted, nil) // queued: no event
	// The queued message is answered next: the chat stays pending (no event).
	var after chat.Chat
	s.do("POST", "/api/v1/chats/"+c.ID+"/interrupt", tok, nil).expect(t, http.StatusOK, &after)
	if after.Status != chat.Pending {
		t.Fatalf("interrupted with a queued message: %s, want pending", after.Status)
	}
	s.do("POST", "/api/v1/chats/"+c.ID+"/interrupt", tok, nil).expect(t, http.StatusOK, nil)
	if ev := feed.expect(events.KindStatusChange, c.ID); ev.Chat.Status != chat.Waiting {
		t.Fatalf("status_change to waiting: %+v", ev.Chat)
	}
	s.do("POST", "/api/v1/chats/"+c.ID+"/interrupt", tok, nil).expect(t, http.StatusOK, nil) // no change: no event

	withMsg := s.createChat(tok, map[string]any{"message": "hello"})
	if ev := feed.expect(events.KindCreated, withMsg.ID); ev.Chat.Status != chat.Pending || ev.Chat.Title != "hello" {
		t.Fatalf("created with a message: %+v", ev.Chat)
	}
	s.do("DELETE", "/api/v1/chats/"+c.ID, tok, nil).expect(t, http.StatusNoContent, nil)
	if ev := feed.expect(events.KindDeleted, c.ID); ev.Chat.Title != "Paris" {
		t.Fatalf("deleted carries the chat as it was: %+v", ev.Chat)
	}
}

func TestFeedWakesWorkers(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	work, err := s.ps.Subscribe(context.Background(), events.WorkTopic)
	if err != nil {
		t.Fatal(err)
	}
	defer work.Close()
	woken := func(what string, want bool) {
		t.Helper()
		select {
		case <-work.C():
			if !want {
				t.Fatalf("%s woke the workers", what)
			}
		default:
			if want {
				t.Fatalf("%s did not wake the workers", what)
			}
		}
	}
	// The memory pubsub delivers during Publish, so each answer comes after
	// its wake-up, if any.
	c := s.createChat(tok, nil)
	woken("create without a message", false)
	s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, map[string]any{"content": "hi"}).expect(t, http.StatusAccepted, nil)
	woken("a message to a waiting chat", true)
	s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, map[string]any{"content": "hi"}).expect(t, http.StatusAccepted, nil)
	woken("a queued message", false)
	s.createChat(tok, map[string]any{"message": "hi"})
	woken("create with a message", true)
	f := s.inStatus(tok, chat.Error)
	<-work.C() // inStatus created it with a message
	s.do("POST", "/api/v1/chats/"+f.ID+"/retry", tok, nil).expect(t, http.StatusOK, nil)
	woken("retry", true)
}

func TestFeedKeepAlive(t *testing.T) {
	s := newSQLite(t, func(su *setup) { su.keepAlive = 5 * time.Millisecond })
	feed := s.watch(s.token("alice"))
	if it := feed.next(); it.Comment != "connected" {
		t.Fatalf("first item %+v, want the opening comment", it)
	}
	for range 3 {
		if it := feed.next(); it.Comment != "keep-alive" {
			t.Fatalf("got %+v, want keep-alive comments", it)
		}
	}
}

func TestFeedSlowSubscriberResyncs(t *testing.T) {
	s := newSQLite(t, func(su *setup) { su.bufferSize = 1 })
	tok := s.token("alice")
	feed, resume := s.watchPaused(tok)
	// A burst of large events the client does not read: the handler blocks
	// on the full connection, its subscription's buffer of one overflows.
	big := chat.Chat{ID: "x", Owner: "alice", Title: strings.Repeat("t", 512<<10)}
	payload, err := json.Marshal(events.FeedEvent{Kind: events.KindTitleChange, Chat: big})
	if err != nil {
		t.Fatal(err)
	}
	const burst = 64 // 32 MiB: more than any socket buffers hold
	for range burst {
		if err := s.ps.Publish(context.Background(), events.FeedTopic("alice"), payload); err != nil {
			t.Fatal(err)
		}
	}
	resume()
	rest := feed.end()
	if len(rest) == 0 || len(rest) > burst {
		t.Fatalf("%d events", len(rest))
	}
	last := rest[len(rest)-1]
	if last.Event != events.KindResync || last.Data != `{"kind":"resync"}` {
		t.Fatalf("last event %q %q, want resync", last.Event, last.Data)
	}
	for _, it := range rest[:len(rest)-1] {
		if it.Event != events.KindTitleChange {
			t.Fatalf("unexpected event %q", it.Event)
		}
	}
	if len(rest)-1 == burst {
		t.Fatal("every event arrived: the subscriber never lagged")
	}
	// A new connection works again.
	again := s.watch(tok)
	c := s.createChat(tok, nil)
	again.expect(events.KindCreated, c.ID)
}
