package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/pubsub"
)

// snapshotWait bounds how long a new stream subscriber waits for the worker
// running the chat to send the step's parts so far; a worker that does not
// answer (it just finished, or died) costs this much delay, never a part.
const snapshotWait = 500 * time.Millisecond

// stream serves GET /api/v1/chats/{id}/stream (DESIGN.md section 6): the
// current status, the durable messages after the cursor (?after= or
// Last-Event-ID), the parts already streamed of the step in progress, then
// live events. Live events are subscribed to before anything is read, so
// nothing falls between the reads and the live feed; duplicates are dropped
// by message id and delta sequence.
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
	sub, err := a.ps.Subscribe(ctx, events.ChatTopic(id))
	if err != nil {
		return err
	}
	defer sub.Close()
	c, err := a.svc.GetChat(ctx, owner, id) // after subscribing: no status change is missed
	if err != nil {
		return err
	}

	st := &chatStream{sse: newSSE(w), lastMsg: after, seq: map[int64]int{}}
	if err := st.sse.start(); err != nil {
		return nil
	}
	if st.status(c) != nil || a.replayMessages(ctx, st, id) != nil {
		return nil
	}
	var nonce string
	var waitSnapshot <-chan time.Time
	if c.Status == chat.Running {
		nonce = uuid.NewString()
		ctl := events.Encode(events.Control{Kind: events.ControlSnapshot, Nonce: nonce})
		if err := a.ps.Publish(ctx, events.ControlTopic(id), ctl); err != nil {
			a.log.Warn("stream: snapshot request not published", "chat", id, "err", err)
		}
		t := time.NewTimer(snapshotWait)
		defer t.Stop()
		waitSnapshot = t.C
	}
	var held []events.ChatEvent // live part events held until the snapshot arrives

	tick := time.NewTicker(a.keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if st.sse.comment("keep-alive") != nil {
				return nil
			}
		case <-waitSnapshot:
			waitSnapshot, nonce = nil, ""
			for _, ev := range held {
				if st.parts(ev.Parts) != nil {
					return nil
				}
			}
			held = nil
		case m, ok := <-sub.C():
			if !ok || m.Missed {
				if (ok && m.Missed) || errors.Is(sub.Err(), pubsub.ErrLagged) {
					_ = st.sse.event(events.KindResync, resyncData)
				}
				return nil
			}
			var ev events.ChatEvent
			if err := json.Unmarshal(m.Payload, &ev); err != nil {
				a.log.Warn("stream: dropping a malformed event", "chat", id, "err", err)
				continue
			}
			switch {
			case ev.Kind == events.KindSnapshot:
				if nonce == "" || ev.Nonce != nonce || ev.Parts == nil {
					continue // another subscriber's
				}
				waitSnapshot, nonce = nil, ""
				if st.parts(ev.Parts) != nil {
					return nil
				}
				for _, h := range held {
					if st.parts(h.Parts) != nil {
						return nil
					}
				}
				held = nil
			case ev.Kind == events.KindPart && nonce != "":
				held = append(held, ev)
			default:
				if st.live(ev) != nil {
					return nil
				}
			}
		}
	}
}

// replayMessages sends the durable messages after the stream's cursor.
func (a *api) replayMessages(ctx context.Context, st *chatStream, id string) error {
	for {
		msgs, err := a.st.ListMessages(ctx, id, st.lastMsg, 500)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := st.message(m); err != nil {
				return err
			}
		}
		if len(msgs) < 500 {
			return nil
		}
	}
}

// chatStream writes one subscriber's chat events, dropping what it sent
// already: messages up to lastMsg, and each message's deltas below seq.
type chatStream struct {
	sse     *sse
	lastMsg int64
	seq     map[int64]int // message id -> deltas sent
}

func (s *chatStream) status(c chat.Chat) error {
	return s.sse.event(events.KindStatus, events.Encode(map[string]any{"status": c.Status, "chat": c}))
}

func (s *chatStream) message(m chat.Message) error {
	if m.ID <= s.lastMsg {
		return nil
	}
	s.lastMsg = m.ID
	delete(s.seq, m.ID)
	return s.sse.eventID(events.KindMessage, strconv.FormatInt(m.ID, 10), events.Encode(map[string]any{"message": m}))
}

// parts sends the deltas of b this subscriber has not had yet.
func (s *chatStream) parts(b *events.PartBatch) error {
	if b == nil || b.MessageID == 0 || b.MessageID <= s.lastMsg {
		return nil // between steps, or the message is durable already
	}
	sent := s.seq[b.MessageID]
	for i, d := range b.Deltas {
		if b.Seq+i < sent {
			continue
		}
		data := events.Encode(map[string]any{"message_id": b.MessageID, "part": d})
		if err := s.sse.event(events.KindPart, data); err != nil {
			return err
		}
		sent = b.Seq + i + 1
	}
	s.seq[b.MessageID] = sent
	return nil
}

// live sends one live event in its public shape.
func (s *chatStream) live(ev events.ChatEvent) error {
	switch ev.Kind {
	case events.KindStatus:
		if ev.Chat != nil {
			return s.status(*ev.Chat)
		}
	case events.KindMessage:
		if ev.Message != nil {
			return s.message(*ev.Message)
		}
	case events.KindPart:
		return s.parts(ev.Parts)
	case events.KindActionRequired:
		return s.sse.event(ev.Kind, events.Encode(map[string]any{"tool_calls": ev.ToolCalls, "deadline": ev.Deadline}))
	case events.KindRetry:
		if ev.Retry != nil {
			return s.sse.event(ev.Kind, events.Encode(ev.Retry))
		}
	case events.KindError:
		if ev.Error != nil {
			return s.sse.event(ev.Kind, events.Encode(map[string]any{"kind": ev.Error.Kind, "message": ev.Error.Message}))
		}
	}
	return nil
}
