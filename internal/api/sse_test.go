package api_test

import (
	"encoding/json"

	"github.com/parleyhq/parley/internal/events"
)

// stream reads the owner feed.
type stream struct{ *sseReader }

// watch opens the owner feed with token and checks the stream's headers.
func (s *server) watch(token string) *stream {
	s.t.Helper()
	st, resume := s.watchPaused(token)
	resume()
	return st
}

// watchPaused opens the owner feed but reads nothing of it until resume is
// called, like a client that does not keep up.
func (s *server) watchPaused(token string) (*stream, func()) {
	s.t.Helper()
	r, resume := s.openSSE("/api/v1/chats/watch", token, nil, true)
	return &stream{r}, resume
}

// event returns the next event, skipping comments, decoded as a feed event;
// it checks that the SSE event name matches the payload's kind.
func (st *stream) event() events.FeedEvent {
	st.t.Helper()
	for {
		it := st.item()
		var ev events.FeedEvent
		if err := json.Unmarshal([]byte(it.Data), &ev); err != nil {
			st.t.Fatalf("event %q: data %q: %v", it.Event, it.Data, err)
		}
		if ev.Kind != it.Event {
			st.t.Fatalf("event %q carries kind %q", it.Event, ev.Kind)
		}
		return ev
	}
}

// expect reads the next event and checks its kind and chat.
func (st *stream) expect(kind, chatID string) events.FeedEvent {
	st.t.Helper()
	ev := st.event()
	if ev.Kind != kind || ev.Chat.ID != chatID {
		st.t.Fatalf("got %s of chat %s, want %s of chat %s", ev.Kind, ev.Chat.ID, kind, chatID)
	}
	return ev
}
