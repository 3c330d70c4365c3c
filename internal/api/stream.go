package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/follow"
)

// stream serves GET /api/v1/chats/{id}/stream: the current status, the
// durable messages after the cursor (?after= or Last-Event-ID), the parts
// already streamed of the step in progress, then live events: a view of
// the follower (internal/follow), which says how nothing is missed or
// shown twice.
//
// Once the token is revoked the stream ends with an unauthorized event,
// within a.tokenCheck. An owner's open streams (with its feeds, AI SDK and
// OpenAI-compatible streams) are held to its max_streams on each replica.
func (a *api) stream(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	cursor := r.URL.Query().Get("after")
	if cursor == "" {
		cursor = r.Header.Get("Last-Event-ID")
	}
	after, err := parseAfter(cursor)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if _, err := a.svc.GetChat(ctx, owner, id); err != nil {
		return err
	}
	release, err := a.gate.OpenStream(ctx, owner)
	if err != nil {
		return err
	}
	defer release()
	out := newSSE(w)
	return a.followChat(ctx, owner, id, follow.Options{After: after}, newChatView(out, out.start))
}

// followChat follows the owner's chat for v, with keep-alives, until the
// client is gone, the view ends it, or the token is revoked (an
// unauthorized event). A follow that missed events ends with a resync
// event. An error before v's stream began is returned, to be answered as
// an HTTP error; after, the stream simply ends.
func (a *api) followChat(ctx context.Context, owner, id string, o follow.Options, v follow.View) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the token checks
	o.KeepAlive = a.keepAlive
	o.Stop = a.tokenRevocation(ctx)
	err := a.follower.Follow(ctx, owner, id, v, o)
	cv := chatViewOf(v)
	if !cv.begun() {
		return err
	}
	switch {
	case errors.Is(err, follow.ErrLagged):
		_ = cv.w.event(events.KindResync, resyncData)
	case errors.Is(err, follow.ErrStopped):
		_ = cv.w.event(kindUnauthorized, revokedData)
	}
	return nil
}

// eventWriter is where a chatView writes its events: the SSE of GET
// /chats/{id}/stream, or another protocol's mapping of the same events
// (the AI SDK stream, the multiplexed stream). An error ends the stream.
type eventWriter interface {
	event(kind string, data []byte) error
	eventID(kind, id string, data []byte) error
	comment(text string) error
}

// chatView shows a followed chat as the events of GET
// /api/v1/chats/{id}/stream, written to w; begin starts the stream before
// its first event (or keep-alive), so an error before any is an HTTP error.
type chatView struct {
	w       eventWriter
	begin   func() error // nil once called
	started bool
}

func newChatView(w eventWriter, begin func() error) *chatView {
	return &chatView{w: w, begin: begin}
}

// chatViewOf returns the chatView v is or wraps.
func chatViewOf(v follow.View) *chatView {
	switch v := v.(type) {
	case *chatView:
		return v
	case interface{ chatView() *chatView }:
		return v.chatView()
	}
	panic("api: not a chat view")
}

// begun reports whether the stream began (or tried to).
func (v *chatView) begun() bool { return v.started }

// open begins the stream if it has not begun.
func (v *chatView) open() error {
	if v.started {
		return nil
	}
	v.started = true
	if v.begin != nil {
		return v.begin()
	}
	return nil
}

func (v *chatView) KeepAlive() error {
	if err := v.open(); err != nil {
		return err
	}
	return v.w.comment("keep-alive")
}

func (v *chatView) Chat(c chat.Chat) error {
	if err := v.open(); err != nil {
		return err
	}
	return v.w.event(events.KindStatus, events.Encode(map[string]any{"status": c.Status, "chat": c}))
}

// Event sends one event in its public shape.
func (v *chatView) Event(ev events.ChatEvent) error {
	if err := v.open(); err != nil {
		return err
	}
	switch ev.Kind {
	case events.KindMessage:
		return v.w.eventID(events.KindMessage, strconv.FormatInt(ev.Message.ID, 10), events.Encode(map[string]any{"message": ev.Message}))
	case events.KindPart:
		for _, d := range ev.Parts.Deltas {
			if err := v.w.event(events.KindPart, events.Encode(map[string]any{"message_id": ev.Parts.MessageID, "part": d})); err != nil {
				return err
			}
		}
	case events.KindActionRequired:
		return v.w.event(ev.Kind, events.Encode(map[string]any{"tool_calls": ev.ToolCalls, "deadline": ev.Deadline}))
	case events.KindToolProgress:
		if ev.Progress != nil {
			p := *ev.Progress
			p.MessageID = 0
			return v.w.event(events.KindPart, events.Encode(map[string]any{"message_id": ev.Progress.MessageID, "part": p}))
		}
	case events.KindHistory:
		return v.w.event(ev.Kind, events.Encode(map[string]any{"superseded_after": ev.SupersededAfter}))
	case events.KindRetry:
		if ev.Retry != nil {
			return v.w.event(ev.Kind, events.Encode(ev.Retry))
		}
	case events.KindError:
		if ev.Error != nil {
			return v.w.event(ev.Kind, events.Encode(map[string]any{"kind": ev.Error.Kind, "message": ev.Error.Message}))
		}
	}
	return nil
}
