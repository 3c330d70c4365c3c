package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/events"
)

// streamTimeout bounds every wait on a stream.
const streamTimeout = 5 * time.Second

// sseItem is one event of a stream, or one comment line (Comment set).
type sseItem struct {
	Event, Data, Comment string
}

// stream reads Server-Sent Events in the background.
type stream struct {
	t     *testing.T
	items chan sseItem // closed at the end of the stream
}

// watch opens the owner feed with token and checks the stream's headers.
func (s *server) watch(token string) *stream {
	s.t.Helper()
	st, resume := s.watchPaused(token)
	resume()
	return st
}

// watchPaused opens the owner feed but reads nothing of it until resume is
// called, like a client that does not keep up.
func (s *server) watchPaused(token string) (st *stream, resume func()) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/api/v1/chats/watch", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { cancel(); res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("watch: status %d", res.StatusCode)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := res.Header.Get(k); got != v {
			s.t.Fatalf("watch: %s %q, want %q", k, got, v)
		}
	}
	st = &stream{t: s.t, items: make(chan sseItem, 1024)}
	gate := make(chan struct{})
	send := func(it sseItem) bool {
		select {
		case st.items <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(st.items)
		select {
		case <-gate:
		case <-ctx.Done():
			return
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var it sseItem
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if it != (sseItem{}) && !send(it) {
					return
				}
				it = sseItem{}
			case strings.HasPrefix(line, ":"):
				if !send(sseItem{Comment: strings.TrimSpace(line[1:])}) {
					return
				}
			case strings.HasPrefix(line, "event: "):
				it.Event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				it.Data = line[len("data: "):]
			}
		}
	}()
	return st, func() { close(gate) }
}

// next returns the next item, failing at the deadline or the end of the stream.
func (st *stream) next() sseItem {
	st.t.Helper()
	select {
	case it, ok := <-st.items:
		if !ok {
			st.t.Fatal("stream ended")
		}
		return it
	case <-time.After(streamTimeout):
		st.t.Fatal("no event before the deadline")
	}
	return sseItem{}
}

// event returns the next event, skipping comments, decoded as a feed event;
// it checks that the SSE event name matches the payload's kind.
func (st *stream) event() events.FeedEvent {
	st.t.Helper()
	for {
		it := st.next()
		if it.Comment != "" {
			continue
		}
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

// end waits for the end of the stream and returns the events it still had.
func (st *stream) end() []sseItem {
	st.t.Helper()
	var rest []sseItem
	deadline := time.After(streamTimeout)
	for {
		select {
		case it, ok := <-st.items:
			if !ok {
				return rest
			}
			if it.Comment == "" {
				rest = append(rest, it)
			}
		case <-deadline:
			st.t.Fatal("the stream did not end before the deadline")
		}
	}
}
