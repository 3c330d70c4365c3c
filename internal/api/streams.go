package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/follow"
	"github.com/parleyhq/parley/internal/store"
)

// maxMuxChats bounds the chats one multiplexed stream carries.
const maxMuxChats = 32

// muxChat is one chat a multiplexed stream carries, from its cursor.
type muxChat struct {
	id    string
	after int64
}

// parseMuxChats reads the chat=<id>[:<after>] parameters of GET
// /api/v1/chats/streams: 1 to maxMuxChats distinct chats.
func parseMuxChats(r *http.Request) ([]muxChat, error) {
	vals := r.URL.Query()["chat"]
	if len(vals) == 0 {
		return nil, badQuery("chat", "name at least one chat: chat=<id>[:<after message id>]")
	}
	if len(vals) > maxMuxChats {
		return nil, badQuery("chat", "%d chats: at most %d per stream", len(vals), maxMuxChats)
	}
	seen := map[string]bool{}
	chats := make([]muxChat, 0, len(vals))
	for _, v := range vals {
		id, cursor, _ := strings.Cut(v, ":")
		if _, err := uuid.Parse(id); err != nil {
			return nil, badQuery("chat", "%q: not a chat id", id)
		}
		if seen[id] {
			return nil, badQuery("chat", "chat %s named twice", id)
		}
		seen[id] = true
		after, err := parseAfter(cursor)
		if err != nil {
			return nil, badQuery("chat", "chat %s: after %q: want a message id", id, cursor)
		}
		chats = append(chats, muxChat{id: id, after: after})
	}
	return chats, nil
}

// streams serves GET /api/v1/chats/streams: the chat streams of several
// chats over one connection, for a client (the web UI's shared worker)
// that would otherwise hold a connection per chat. Each event is what the
// chat's own stream sends, its data with a "chat_id" added; no SSE ids (a
// client resumes each chat by its cursor when it reconnects). A chat whose
// follow missed events gets a resync event of its own and is no longer
// carried; the others go on. The connection is one stream of max_streams.
func (a *api) streams(w http.ResponseWriter, r *http.Request, owner string) error {
	chats, err := parseMuxChats(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // ends the follows and the token checks
	for _, c := range chats {
		if _, err := a.svc.GetChat(ctx, owner, c.id); errors.Is(err, store.ErrNotFound) {
			return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "chat " + c.id + " not found",
				Details: map[string]any{"chat_id": c.id}}
		} else if err != nil {
			return err
		}
	}
	release, err := a.gate.OpenStream(ctx, owner)
	if err != nil {
		return err
	}
	defer release()

	out := &muxOut{sse: newSSE(w), started: make(chan struct{})}
	var ready sync.WaitGroup // every follow subscribed: the stream may begin
	ready.Add(len(chats))
	type ended struct {
		id  string
		err error
	}
	done := make(chan ended, len(chats))
	var wg sync.WaitGroup
	for _, c := range chats {
		wg.Add(1)
		var once sync.Once
		subscribed := func() { once.Do(ready.Done) }
		begin := func() error {
			subscribed()
			<-out.started
			return out.startErr
		}
		v := newChatView(&muxWriter{out: out, chatID: c.id}, begin)
		go func() {
			defer wg.Done()
			err := a.follower.Follow(ctx, owner, c.id, v, follow.Options{After: c.after})
			subscribed() // a follow that failed before its first event
			done <- ended{id: c.id, err: err}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	ready.Wait()
	out.startErr = out.sse.start()
	close(out.started)
	if out.startErr != nil {
		return nil
	}

	tick := time.NewTicker(a.keepAlive)
	defer tick.Stop()
	revoked := a.tokenRevocation(ctx)
	for open := len(chats); open > 0; {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if out.comment("keep-alive") != nil {
				return nil
			}
		case <-revoked:
			cancel()
			wg.Wait()
			_ = out.event("", kindUnauthorized, revokedData)
			return nil
		case e := <-done:
			open--
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(e.err, follow.ErrLagged) || errors.Is(e.err, store.ErrNotFound) {
				// This chat's client re-reads it and reconnects with it.
				if out.event(e.id, events.KindResync, resyncData) != nil {
					return nil
				}
				continue
			}
			a.log.Warn("multiplexed stream: a chat's follow ended", "chat", e.id, "err", e.err)
			return nil // the client is gone, or the chat could not be followed: it reconnects
		}
	}
	return nil
}

// muxOut is a multiplexed stream's SSE, shared by its chats' follows.
type muxOut struct {
	mu       sync.Mutex
	sse      *sse
	started  chan struct{} // closed once the stream began (startErr says how)
	startErr error
}

// event writes one event of chat id ("" for the connection's own), its
// JSON object data tagged with the chat's id.
func (o *muxOut) event(id, kind string, data []byte) error {
	if id != "" {
		data = tagChat(id, data)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sse.event(kind, data)
}

func (o *muxOut) comment(text string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sse.comment(text)
}

// tagChat adds "chat_id" to a JSON object.
func tagChat(id string, data []byte) []byte {
	tag, _ := json.Marshal(id)
	if len(data) < 2 || data[0] != '{' {
		return []byte(fmt.Sprintf(`{"chat_id":%s}`, tag))
	}
	rest := data[1:]
	sep := ","
	if strings.TrimSpace(string(rest)) == "}" {
		sep = ""
	}
	return append([]byte(`{"chat_id":`+string(tag)+sep), rest...)
}

// muxWriter is one chat's eventWriter on a multiplexed stream.
type muxWriter struct {
	out    *muxOut
	chatID string
}

func (m *muxWriter) event(kind string, data []byte) error { return m.out.event(m.chatID, kind, data) }

// eventID drops the SSE id: the stream's events are of many chats, and a
// client resumes each by its own cursor.
func (m *muxWriter) eventID(kind, _ string, data []byte) error { return m.event(kind, data) }

func (m *muxWriter) comment(text string) error { return m.out.comment(text) }
