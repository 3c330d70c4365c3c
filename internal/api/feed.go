package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/pubsub"
)

// sseWriteTimeout bounds each write of a stream, so a client that stops
// reading is dropped instead of holding the handler forever.
const sseWriteTimeout = 10 * time.Second

// resyncData is the payload of the resync event.
var resyncData = []byte(`{"kind":"` + events.KindResync + `"}`)

// watch streams the owner's feed (created, deleted, status_change,
// title_change) as Server-Sent Events. It subscribes before answering, so
// every change committed after the response headers arrive is delivered. A
// subscriber that falls behind, or a subscription that may have lost
// messages, gets a resync event and the stream ends: the client reconnects
// and re-reads the chats. Once the token is revoked the stream ends with an
// unauthorized event, within a.tokenCheck. It counts as one of the owner's
// max_streams on this replica.
func (a *api) watch(w http.ResponseWriter, r *http.Request, owner string) error {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // ends the token checks
	release, err := a.gate.OpenStream(ctx, owner)
	if err != nil {
		return err
	}
	defer release()
	sub, err := a.ps.Subscribe(ctx, events.FeedTopic(owner))
	if err != nil {
		return fmt.Errorf("subscribe to the feed of %s: %w", owner, err)
	}
	defer sub.Close()

	s := newSSE(w)
	if err := s.start(); err != nil {
		return nil // the client is gone; nothing more to answer
	}
	tick := time.NewTicker(a.keepAlive)
	defer tick.Stop()
	revoked := a.tokenRevocation(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if s.comment("keep-alive") != nil {
				return nil
			}
		case <-revoked:
			_ = s.event(kindUnauthorized, revokedData)
			return nil
		case m, ok := <-sub.C():
			switch {
			case !ok && errors.Is(sub.Err(), pubsub.ErrLagged), ok && m.Missed:
				_ = s.event(events.KindResync, resyncData)
				return nil
			case !ok:
				return nil // the pubsub closed (shutdown) or the client left
			}
			var ev struct {
				Kind string `json:"kind"`
			}
			if err := json.Unmarshal(m.Payload, &ev); err != nil || ev.Kind == "" {
				a.log.Warn("feed: dropping a malformed event", "owner", owner, "err", err)
				continue
			}
			if s.event(ev.Kind, m.Payload) != nil {
				return nil
			}
		}
	}
}

// sse writes Server-Sent Events, each flushed at once and under a write
// deadline.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) *sse { return &sse{w: w, rc: http.NewResponseController(w)} }

// start sends the stream's headers (not to be sniffed, as JSON answers
// are not) and an opening comment.
func (s *sse) start() error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	return s.comment("connected")
}

// event writes one event; data must be a single line of JSON.
func (s *sse) event(kind string, data []byte) error {
	return s.write(func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, compactLine(data))
		return err
	})
}

// eventID writes one event with an SSE id, the cursor a client resumes from
// (Last-Event-ID).
func (s *sse) eventID(kind, id string, data []byte) error {
	return s.write(func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", id, kind, compactLine(data))
		return err
	})
}

// comment writes a comment line, which clients ignore; it keeps idle
// connections (and proxies) alive.
func (s *sse) comment(text string) error {
	return s.write(func(w io.Writer) error {
		_, err := fmt.Fprintf(w, ": %s\n\n", text)
		return err
	})
}

func (s *sse) write(f func(io.Writer) error) error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if err := f(s.w); err != nil {
		return err
	}
	return s.rc.Flush()
}

// compactLine returns data as one line: JSON as published is already
// compact, but a payload from elsewhere must never break the framing.
func compactLine(data []byte) []byte {
	for _, b := range data {
		if b == '\n' || b == '\r' {
			var buf bytes.Buffer
			if json.Compact(&buf, data) == nil {
				return buf.Bytes()
			}
			return []byte(`{}`)
		}
	}
	return data
}
