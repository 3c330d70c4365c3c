package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/store"
)

// snapshotWait bounds how long live deltas are held for the snapshot a new
// subscriber asked the running worker for. Past it, deltas that follow on
// from what was sent go out; a batch that would leave a gap stays held until
// the snapshot, the durable message, or the end of the run: a subscriber is
// never shown deltas with a hole in them.
const snapshotWait = 500 * time.Millisecond

// maxHeldDeltas bounds the deltas held for one subscriber; past it the
// subscriber is told to resync.
const maxHeldDeltas = 10000

// stream serves GET /api/v1/chats/{id}/stream: the current status, the
// durable messages after the cursor (?after= or Last-Event-ID), the parts
// already streamed of the step in progress, then live events. Live events
// are subscribed to before anything is read, so nothing falls between the
// reads and the live feed; duplicates are dropped by message id and delta
// sequence.
//
// A run's deltas cross replicas only once some stream has asked its worker
// for a snapshot, so a stream asks whenever a run is under way: when it
// joins a running chat (holding live deltas until the snapshot), and when it
// sees the chat start running (in-order deltas flow meanwhile; the gap logic
// holds any that would leave a hole).
//
// Once the token is revoked the stream ends with an unauthorized event,
// within a.tokenCheck. An owner's open streams (with its feeds) are held to
// its max_streams on each replica.
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
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // ends the token checks
	if _, err := a.svc.GetChat(ctx, owner, id); err != nil {
		return err
	}
	release, err := a.gate.OpenStream(ctx, owner)
	if err != nil {
		return err
	}
	defer release()
	sub, err := a.ps.Subscribe(ctx, events.ChatTopic(id))
	if err != nil {
		return err
	}
	defer sub.Close()
	c, err := a.svc.GetChat(ctx, owner, id) // after subscribing: no status change is missed
	if err != nil {
		return err
	}

	out := newSSE(w)
	if err := out.start(); err != nil {
		return nil
	}
	a.follow(ctx, id, c, sub, &chatStream{sse: out, lastMsg: after, seq: map[int64]int{}})
	return nil
}

// eventWriter is where a chatStream writes its events: the SSE of GET
// /chats/{id}/stream, or another protocol's mapping of the same events
// (the AI SDK stream). An error ends the stream.
type eventWriter interface {
	event(kind string, data []byte) error
	eventID(kind, id string, data []byte) error
	comment(text string) error
}

// follow writes c's status, the durable messages after st's cursor, the
// parts of the step in progress and then live events of sub to st, until
// the client is gone or the writer refuses an event.
func (a *api) follow(ctx context.Context, id string, c chat.Chat, sub pubsub.Subscription, st *chatStream) {
	if st.status(c) != nil || a.replayMessages(ctx, st, id) != nil {
		return
	}
	var waitSnapshot <-chan time.Time
	if c.Status == chat.Running {
		st.nonce = a.askSnapshot(ctx, id)
		t := time.NewTimer(snapshotWait)
		defer t.Stop()
		waitSnapshot = t.C
		st.holding = true
	}

	tick := time.NewTicker(a.keepAlive)
	defer tick.Stop()
	revoked := a.tokenRevocation(ctx)
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			err = st.sse.comment("keep-alive")
		case <-revoked:
			_ = st.sse.event(kindUnauthorized, revokedData)
			return
		case <-waitSnapshot:
			waitSnapshot, st.holding = nil, false
			err = st.flushHeld()
		case m, ok := <-sub.C():
			if !ok || m.Missed {
				if (ok && m.Missed) || errors.Is(sub.Err(), pubsub.ErrLagged) {
					_ = st.sse.event(events.KindResync, resyncData)
				}
				return
			}
			var ev events.ChatEvent
			if err := json.Unmarshal(m.Payload, &ev); err != nil {
				a.log.Warn("stream: dropping a malformed event", "chat", id, "err", err)
				continue
			}
			if st.startedRunning(ev) && events.DeltasStayWithWorker(a.ps) {
				st.nonce = a.askSnapshot(ctx, id)
			}
			err = st.live(ev)
		}
		if errors.Is(err, errTooFarBehind) {
			_ = st.sse.event(events.KindResync, resyncData)
			return
		}
		if err != nil {
			return // the client is gone
		}
	}
}

// askSnapshot asks the chat's worker for a snapshot (events.AskSnapshot),
// logging a request that could not be sent.
func (a *api) askSnapshot(ctx context.Context, id string) string {
	nonce, err := events.AskSnapshot(ctx, a.ps, id)
	if err != nil {
		a.log.Warn("stream: snapshot request not published", "chat", id, "err", err)
	}
	return nonce
}

// replayMessages sends the durable messages after the stream's cursor.
func (a *api) replayMessages(ctx context.Context, st *chatStream, id string) error {
	return store.ForEachMessage(ctx, a.st, id, st.lastMsg, st.message)
}

// errTooFarBehind ends a stream that would hold more deltas than allowed.
var errTooFarBehind = errors.New("too many deltas held")

// chatStream writes one subscriber's chat events, dropping what it sent
// already: messages up to lastMsg, each message's deltas below seq, and
// status events no newer than the last one sent.
// Deltas that do not follow on from what was sent are held until the
// missing ones arrive (the snapshot), or the durable message makes them moot.
type chatStream struct {
	sse     eventWriter
	lastMsg int64
	seq     map[int64]int // message id -> deltas sent
	// version is the Version of the chat in the last status sent: a status
	// event of an older or the same chat (a change the first status already
	// showed, delivered late) is dropped.
	version int64

	nonce   string              // the snapshot request in flight, "" if none
	holding bool                // hold every delta until the snapshot (or its timeout)
	held    []*events.PartBatch // batches not sent yet, in arrival order
	nHeld   int
}

func (s *chatStream) status(c chat.Chat) error {
	if !s.newer(c) {
		return nil
	}
	s.version = max(s.version, c.Version)
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

// newer reports whether c is newer than the chat of the last status sent.
// A chat without a version (from a replica older than versions) counts as
// newer: nothing can be told of it.
func (s *chatStream) newer(c chat.Chat) bool {
	return c.Version == 0 || c.Version > s.version
}

// startedRunning reports whether ev says the chat started running (and is
// news): the stream must then ask the new run for its deltas. It asks even
// with a request in flight: a request sent on joining, between the
// acquisition's commit and the run's subscription to its control topic,
// went unheard.
func (s *chatStream) startedRunning(ev events.ChatEvent) bool {
	return ev.Kind == events.KindStatus && ev.Chat != nil && ev.Chat.Status == chat.Running && s.newer(*ev.Chat)
}

// parts sends the deltas of b this subscriber has not had, or holds b if
// sending it would leave a gap.
func (s *chatStream) parts(b *events.PartBatch) error {
	if b == nil || b.MessageID == 0 || b.MessageID <= s.lastMsg {
		return nil // between steps, or the message is durable already
	}
	if s.holding || b.Seq > s.seq[b.MessageID] {
		s.held = append(s.held, b)
		if s.nHeld += len(b.Deltas); s.nHeld > maxHeldDeltas {
			return errTooFarBehind
		}
		return nil
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

// flushHeld sends the held batches that now follow on from what was sent,
// repeating until none does; the others stay held.
func (s *chatStream) flushHeld() error {
	for progress := true; progress; {
		progress = false
		rest := s.held[:0]
		for _, b := range s.held {
			switch {
			case b.MessageID <= s.lastMsg || b.Seq+len(b.Deltas) <= s.seq[b.MessageID]:
				// moot: durable already, or nothing new
			case b.Seq <= s.seq[b.MessageID]:
				if err := s.parts(b); err != nil {
					return err
				}
				progress = true
			default:
				rest = append(rest, b)
			}
		}
		s.held = rest
	}
	s.nHeld = 0
	for _, b := range s.held {
		s.nHeld += len(b.Deltas)
	}
	return nil
}

// live sends one live event in its public shape.
func (s *chatStream) live(ev events.ChatEvent) error {
	switch ev.Kind {
	case events.KindSnapshot:
		if s.nonce == "" || ev.Nonce != s.nonce || ev.Parts == nil {
			return nil // another subscriber's
		}
		s.nonce, s.holding = "", false
		if err := s.parts(ev.Parts); err != nil {
			return err
		}
		return s.flushHeld()
	case events.KindStatus:
		if ev.Chat == nil || !s.newer(*ev.Chat) {
			return nil // older than what the stream showed: the run it ends is moot
		}
		if ev.Chat.Status != chat.Running {
			// The run ended: deltas still held can never be completed; the
			// durable messages carry what the run kept.
			s.held, s.nHeld, s.nonce, s.holding = nil, 0, "", false
		}
		return s.status(*ev.Chat)
	case events.KindMessage:
		if ev.Message == nil {
			return nil
		}
		if err := s.message(*ev.Message); err != nil {
			return err
		}
		return s.flushHeld()
	case events.KindPart:
		return s.parts(ev.Parts)
	case events.KindActionRequired:
		return s.sse.event(ev.Kind, events.Encode(map[string]any{"tool_calls": ev.ToolCalls, "deadline": ev.Deadline}))
	case events.KindToolProgress:
		if ev.Progress != nil {
			p := *ev.Progress
			p.MessageID = 0
			return s.sse.event(events.KindPart, events.Encode(map[string]any{"message_id": ev.Progress.MessageID, "part": p}))
		}
	case events.KindHistory:
		return s.sse.event(ev.Kind, events.Encode(map[string]any{"superseded_after": ev.SupersededAfter, "message": ev.Message}))
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
