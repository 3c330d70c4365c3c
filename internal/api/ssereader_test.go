package api_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// streamTimeout bounds every wait on a stream.
const streamTimeout = 5 * time.Second

// sseEv is one item of an event stream: an event (with its SSE id, if any)
// or a comment line (Comment set).
type sseEv struct {
	ID, Event, Data, Comment string
}

// sseReader reads Server-Sent Events in the background; the owner feed and
// the chat stream readers build on it.
type sseReader struct {
	t     *testing.T
	items chan sseEv // closed at the end of the stream
}

// openSSE opens an event stream at path with tok and extra request headers,
// checks the answer's status and headers, and reads it in the background;
// when paused it reads nothing until resume is called (a client that does
// not keep up). It returns once the server answered: it has subscribed then.
func (s *server) openSSE(path, tok string, header map[string]string, paused bool) (r *sseReader, resume func()) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+path, nil)
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { cancel(); res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("GET %s: status %d", path, res.StatusCode)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no", "X-Content-Type-Options": "nosniff"} {
		if got := res.Header.Get(k); got != v {
			s.t.Fatalf("GET %s: %s %q, want %q", path, k, got, v)
		}
	}
	r = &sseReader{t: s.t, items: make(chan sseEv, 4096)}
	gate := make(chan struct{})
	go func() {
		defer close(r.items)
		select {
		case <-gate:
		case <-ctx.Done():
			return
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var it sseEv
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if it != (sseEv{}) {
					select {
					case r.items <- it:
					case <-ctx.Done():
						return
					}
				}
				it = sseEv{}
			case strings.HasPrefix(line, ":"):
				it.Comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				it.ID = line[len("id: "):]
			case strings.HasPrefix(line, "event: "):
				it.Event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				it.Data = line[len("data: "):]
			}
		}
	}()
	if paused {
		return r, func() { close(gate) }
	}
	close(gate)
	return r, func() {}
}

// next returns the next item, comments included, failing at the deadline
// or the end of the stream.
func (r *sseReader) next() sseEv {
	r.t.Helper()
	select {
	case it, ok := <-r.items:
		if !ok {
			r.t.Fatal("the stream ended")
		}
		return it
	case <-time.After(streamTimeout):
		r.t.Fatal("no event before the deadline")
	}
	return sseEv{}
}

// item returns the next event, skipping comments.
func (r *sseReader) item() sseEv {
	r.t.Helper()
	for {
		if it := r.next(); it.Comment == "" {
			return it
		}
	}
}

// end waits for the end of the stream and returns the events it still had.
func (r *sseReader) end() []sseEv {
	r.t.Helper()
	var rest []sseEv
	deadline := time.After(streamTimeout)
	for {
		select {
		case it, ok := <-r.items:
			if !ok {
				return rest
			}
			if it.Comment == "" {
				rest = append(rest, it)
			}
		case <-deadline:
			r.t.Fatal("the stream did not end before the deadline")
		}
	}
}
