package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// muxEv is an event of the multiplexed stream: its name, the chat it
// belongs to, and its data.
type muxEv struct {
	sseEv
	chatID string
	data   map[string]json.RawMessage
}

func nextMux(t *testing.T, r *sseReader) muxEv {
	t.Helper()
	ev := r.item()
	var data map[string]json.RawMessage
	if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
		t.Fatalf("event %s: data %q: %v", ev.Event, ev.Data, err)
	}
	var id string
	_ = json.Unmarshal(data["chat_id"], &id)
	return muxEv{sseEv: ev, chatID: id, data: data}
}

// TestMultiplexedStreamCarriesSeveralChats: one connection carries the
// streams of several chats, each event exactly the chat stream's with its
// chat's id added and no SSE id; each chat is resumed from its own cursor;
// a run in one chat shows in that chat's events only.
func TestMultiplexedStreamCarriesSeveralChats(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	s := newLive(t, fake)
	tok := s.token("alice")
	a := s.createChat(tok, map[string]any{"title": "a"})
	b := s.createChat(tok, map[string]any{"title": "b"})
	c := s.createChat(tok, map[string]any{"title": "c"})

	// Chat a has a turn already; the client saw up to its user message.
	fake.Push(llmtest.Turn{Text: "answer a"})
	watchA := s.watchChat(tok, a.ID, streamOpts{})
	watchA.untilStatus(chat.Waiting) // as it stands
	s.do("POST", "/api/v1/chats/"+a.ID+"/messages", tok, map[string]any{"content": "question a"}).expect(t, http.StatusAccepted, nil)
	watchA.untilStatus(chat.Running)
	watchA.untilStatus(chat.Waiting)
	hist := s.messages(tok, a.ID)
	if len(hist) != 2 {
		t.Fatalf("chat a holds %d messages, want 2", len(hist))
	}

	r, _ := s.openSSE(fmt.Sprintf("/api/v1/chats/streams?chat=%s:%d&chat=%s&chat=%s", a.ID, hist[0].ID, b.ID, c.ID), tok, nil, false)
	// Each chat's status, and a's assistant message after the cursor.
	first := map[string][]string{}
	for range 4 {
		ev := nextMux(t, r)
		first[ev.chatID] = append(first[ev.chatID], ev.Event)
		if ev.ID != "" {
			t.Fatalf("event %s carries SSE id %q", ev.Event, ev.ID)
		}
		if ev.Event == events.KindMessage {
			var m chat.Message
			if err := json.Unmarshal(ev.data["message"], &m); err != nil || m.ID != hist[1].ID {
				t.Fatalf("chat a replayed message %+v (%v), want only %d", m, err, hist[1].ID)
			}
		}
	}
	want := map[string]string{a.ID: "status message", b.ID: "status", c.ID: "status"}
	for id, w := range want {
		if got := strings.Join(first[id], " "); got != w {
			t.Fatalf("chat %s opened with %q, want %q (all: %v)", id, got, w, first)
		}
	}

	// A run in b: its events, tagged b, up to its end; none of a's or c's.
	fake.Push(llmtest.Turn{Text: "answer b", ChunkSize: 2})
	s.do("POST", "/api/v1/chats/"+b.ID+"/messages", tok, map[string]any{"content": "question b"}).expect(t, http.StatusAccepted, nil)
	var text string
	var kinds []string
	for {
		ev := nextMux(t, r)
		if ev.chatID != b.ID {
			t.Fatalf("event %s of chat %q during b's run: %s", ev.Event, ev.chatID, ev.Data)
		}
		kinds = append(kinds, ev.Event)
		if ev.Event == events.KindPart {
			var d events.Delta
			if err := json.Unmarshal(ev.data["part"], &d); err != nil {
				t.Fatal(err)
			}
			text += d.Text
		}
		if ev.Event == events.KindStatus && strings.Contains(string(ev.data["status"]), string(chat.Waiting)) {
			break
		}
	}
	if text != "answer b" {
		t.Fatalf("b's parts say %q, want %q (events %v)", text, "answer b", kinds)
	}
	if j := strings.Join(kinds, " "); !strings.Contains(j, "message") || !strings.HasPrefix(j, "message status") {
		t.Fatalf("b's events: %s", j)
	}
}

// TestMultiplexedStreamRefusals: another owner's chat is a 404 naming it;
// too many chats, one named twice, a malformed id or cursor are 400s; none
// opens a stream.
func TestMultiplexedStreamRefusals(t *testing.T) {
	s := newSQLite(t)
	alice, bob := s.token("alice"), s.token("bob")
	mine := s.createChat(alice, map[string]any{"title": "mine"})
	theirs := s.createChat(bob, map[string]any{"title": "theirs"})

	res := s.do("GET", "/api/v1/chats/streams?chat="+mine.ID+"&chat="+theirs.ID, alice, nil)
	e := res.expectError(t, http.StatusNotFound, "not_found")
	if e.Error.Details["chat_id"] != theirs.ID || !strings.Contains(e.Error.Message, theirs.ID) {
		t.Fatalf("404 %+v does not name bob's chat %s", e.Error, theirs.ID)
	}
	many := make([]string, 33)
	for i := range many {
		many[i] = "chat=" + s.createChat(alice, map[string]any{"title": "t"}).ID
	}
	for name, q := range map[string]string{
		"33 chats":  strings.Join(many, "&"),
		"none":      "",
		"twice":     "chat=" + mine.ID + "&chat=" + mine.ID + ":3",
		"bad id":    "chat=nope",
		"bad after": "chat=" + mine.ID + ":x",
	} {
		res := s.do("GET", "/api/v1/chats/streams?"+q, alice, nil)
		if e := res.expectError(t, http.StatusBadRequest, "invalid_query"); e.Error.Details["param"] != "chat" {
			t.Fatalf("%s: %+v", name, e.Error)
		}
	}
	// 32 chats are fine.
	r, _ := s.openSSE("/api/v1/chats/streams?"+strings.Join(many[:32], "&"), alice, nil, false)
	if ev := nextMux(t, r); ev.Event != events.KindStatus || ev.chatID == "" {
		t.Fatalf("first event %+v", ev)
	}
}

// TestMultiplexedStreamResyncsOneChat: a chat whose events the client did
// not keep up with gets a resync of its own and is no longer carried; the
// other chats go on over the same connection.
func TestMultiplexedStreamResyncsOneChat(t *testing.T) {
	s := newSQLite(t, func(su *setup) { su.bufferSize = 1 })
	tok := s.token("alice")
	busy := s.createChat(tok, map[string]any{"title": "busy"})
	quiet := s.createChat(tok, map[string]any{"title": "quiet"})
	r, resume := s.openSSE("/api/v1/chats/streams?chat="+busy.ID+"&chat="+quiet.ID, tok, nil, true)
	// A burst of large messages the client does not read: the busy chat's
	// follow blocks on the full connection, its buffer of one overflows.
	const burst = 64 // 32 MiB: more than any socket buffers hold
	big := strings.Repeat("m", 512<<10)
	for i := range burst {
		m := chat.Message{ID: int64(1000 + i), ChatID: busy.ID, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: big}}}
		if err := s.ps.Publish(context.Background(), events.ChatTopic(busy.ID), events.Encode(events.ChatEvent{Kind: events.KindMessage, Message: &m})); err != nil {
			t.Fatal(err)
		}
	}
	resume()
	for {
		ev := nextMux(t, r)
		if ev.Event == events.KindResync {
			if ev.chatID != busy.ID {
				t.Fatalf("resync of chat %q, want the busy chat %s", ev.chatID, busy.ID)
			}
			break
		}
		if ev.Event == events.KindMessage && ev.chatID != busy.ID {
			t.Fatalf("a message of chat %q", ev.chatID)
		}
	}
	// The quiet chat is still carried.
	m := chat.Message{ID: 5000, ChatID: quiet.ID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("still here")}}
	if err := s.ps.Publish(context.Background(), events.ChatTopic(quiet.ID), events.Encode(events.ChatEvent{Kind: events.KindMessage, Message: &m})); err != nil {
		t.Fatal(err)
	}
	for {
		ev := nextMux(t, r)
		if ev.Event == events.KindMessage {
			if ev.chatID != quiet.ID || !strings.Contains(ev.Data, "still here") {
				t.Fatalf("message %s of chat %q after the resync", ev.Data, ev.chatID)
			}
			break
		}
		if ev.Event != events.KindStatus {
			t.Fatalf("%s event of chat %q after the resync", ev.Event, ev.chatID)
		}
	}
}
