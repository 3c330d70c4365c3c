// Package follow follows a chat for whoever shows it live: it subscribes to
// the chat's topic, reads the chat, replays the durable messages after a
// cursor, asks the running worker for a snapshot of the step in progress
// (on joining a running chat, and again on every running announcement),
// puts the steps' deltas in order, each once, and hands all of it to a
// View. The chat's SSE stream, the multiplexed stream, the AI SDK routes and
// the OpenAI facade are views of this one follower, the way one
// http.Transport serves every client.
package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/store"
)

// SnapshotWait bounds how long live deltas are held for the snapshot a
// follow asked the running worker for on joining. Past it, deltas that
// follow on from what was shown go out; a batch that would leave a gap stays
// held until the snapshot, the durable message, or the end of the run: a
// view is never shown deltas with a hole in them.
const SnapshotWait = 500 * time.Millisecond

// maxHeldDeltas bounds the deltas held for one follow; past it the follow
// ends with ErrLagged.
const maxHeldDeltas = 10000

var (
	// ErrLagged ends a follow that missed events (its subscription lagged,
	// or it would hold too many deltas) and has no Poll to catch up with:
	// its client must re-read the chat (a stream's resync event).
	ErrLagged = errors.New("follow: events were missed")
	// ErrStopped ends a follow whose Options.Stop was closed.
	ErrStopped = errors.New("follow: stopped")
)

// View shows a followed chat. Its methods are called from the follow's
// goroutine only; an error ends the follow, and Follow returns it.
type View interface {
	// Chat gets the chat as first read, and each newer state of it: a
	// status event, or a re-read (Options.Poll). A change the view was
	// shown already, delivered late, never comes again.
	Chat(c chat.Chat) error
	// Event gets the chat's other events, in order: each durable message
	// after the cursor once, in id order (replayed first, then live);
	// each step's deltas once and in order, as part events whose batch
	// holds only deltas not shown yet (none of a message already durable);
	// and action_required, retry, error, tool-progress and history events
	// as published. Snapshots are the follower's own: views see their
	// deltas as part events.
	Event(ev events.ChatEvent) error
}

// KeepAliver is a View that keeps its connection alive; KeepAlive is
// called every Options.KeepAlive.
type KeepAliver interface {
	KeepAlive() error
}

// Chats reads a chat as its owner may: store.ErrNotFound for another
// owner's (the service).
type Chats interface {
	GetChat(ctx context.Context, owner, id string) (chat.Chat, error)
}

// Follower follows chats; one serves every view of a replica.
type Follower struct {
	ps    pubsub.PubSub
	chats Chats
	msgs  store.Reader
	log   *slog.Logger
}

// New returns a follower reading chats through chats, messages from msgs,
// and events from ps. A nil log discards.
func New(ps pubsub.PubSub, chats Chats, msgs store.Reader, log *slog.Logger) *Follower {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Follower{ps: ps, chats: chats, msgs: msgs, log: log}
}

// Options shape one follow.
type Options struct {
	// After is the cursor: durable messages after this id are shown.
	After int64
	// Start, when set, runs once subscribed, before the chat is read: the
	// write that starts a run, whose every event is then heard. A cursor
	// it returns (not 0) replaces After.
	Start func(ctx context.Context) (after int64, err error)
	// KeepAlive is the interval of the view's keep-alives (a KeepAliver);
	// 0 for none.
	KeepAlive time.Duration
	// Poll, when set, re-reads the chat this often, and at once when
	// events were missed: events are then hints, and a lost one costs
	// latency, never the end. Without it a miss ends the follow with
	// ErrLagged.
	Poll time.Duration
	// Stop, when closed, ends the follow with ErrStopped.
	Stop <-chan struct{}
}

// Follow follows the owner's chat id for v until ctx ends (ctx's error),
// Stop is closed (ErrStopped), events were missed without Poll (ErrLagged),
// or v returns an error (that error). Live events are subscribed to before
// anything is read, so nothing falls between the reads and the live feed;
// duplicates are dropped by message id, delta sequence and chat version.
//
// A run's deltas cross replicas only once some follow asked its worker for
// a snapshot (events.DeltasStayWithWorker). A follow asks when it joins a
// running chat (holding live deltas until the snapshot, at most
// SnapshotWait), and again on every running announcement it hears, whatever
// the announcement's version: a request sent on joining, between the
// commit that made the chat running and the worker's subscription to its
// control topic, reached nobody, and the announcement, which the worker
// sends once it listens, carries the version the follow already read.
func (f *Follower) Follow(ctx context.Context, owner, id string, v View, o Options) error {
	sub, err := f.ps.Subscribe(ctx, events.ChatTopic(id))
	if err != nil {
		return fmt.Errorf("subscribe to chat %s: %w", id, err)
	}
	defer sub.Close()
	if o.Start != nil {
		after, err := o.Start(ctx)
		if err != nil {
			return err
		}
		if after != 0 {
			o.After = after
		}
	}
	c, err := f.chats.GetChat(ctx, owner, id) // after subscribing: no change is missed
	if err != nil {
		return err
	}
	s := &state{view: v, lastMsg: o.After, seq: map[int64]int{}}
	if err := s.chat(c); err != nil {
		return err
	}
	if err := store.ForEachMessage(ctx, f.msgs, id, s.lastMsg, s.message); err != nil {
		return err
	}
	var waitSnapshot <-chan time.Time
	if c.Status == chat.Running {
		s.nonce = f.requestSnapshot(ctx, id)
		t := time.NewTimer(SnapshotWait)
		defer t.Stop()
		waitSnapshot = t.C
		s.holding = true
	}
	var keepAlive, poll <-chan time.Time
	if ka, ok := v.(KeepAliver); ok && o.KeepAlive > 0 {
		t := time.NewTicker(o.KeepAlive)
		defer t.Stop()
		keepAlive = t.C
		s.keepAlive = ka.KeepAlive
	}
	if o.Poll > 0 {
		t := time.NewTicker(o.Poll)
		defer t.Stop()
		poll = t.C
	}
	reread := func() error {
		c, err := f.chats.GetChat(ctx, owner, id)
		switch {
		case err == nil:
			return s.chat(c)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, store.ErrNotFound):
			return err // deleted meanwhile
		}
		f.log.Warn("follow: chat not read; trying again", "chat", id, "err", err)
		return nil
	}
	subC := sub.C()
	for {
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-o.Stop:
			return ErrStopped
		case <-keepAlive:
			err = s.keepAlive()
		case <-poll:
			err = reread()
		case <-waitSnapshot:
			waitSnapshot, s.holding = nil, false
			err = s.flushHeld()
		case m, ok := <-subC:
			if !ok || m.Missed {
				if o.Poll == 0 {
					return ErrLagged
				}
				if !ok {
					subC = nil // lagged or closed: the polls go on alone
				}
				err = reread()
				break
			}
			var ev events.ChatEvent
			if err := json.Unmarshal(m.Payload, &ev); err != nil {
				f.log.Warn("follow: dropping a malformed event", "chat", id, "err", err)
				continue
			}
			if announcesRun(ev) && events.DeltasStayWithWorker(f.ps) {
				s.nonce = f.requestSnapshot(ctx, id)
			}
			err = s.live(ev)
		}
		if errors.Is(err, errTooFarBehind) {
			return ErrLagged
		}
		if err != nil {
			return err
		}
	}
}

// announcesRun reports whether ev announces a run (the chat is running),
// whatever its version: the follow must then ask the run's worker for its
// deltas, since a request sent before the worker listened was lost.
func announcesRun(ev events.ChatEvent) bool {
	return ev.Kind == events.KindStatus && ev.Chat != nil && ev.Chat.Status == chat.Running
}

// requestSnapshot asks the chat's worker for a snapshot (events.AskSnapshot)
// and returns the request's nonce, logging a request that could not be
// sent.
func (f *Follower) requestSnapshot(ctx context.Context, id string) string {
	nonce, err := events.AskSnapshot(ctx, f.ps, id)
	if err != nil {
		f.log.Warn("follow: snapshot request not published", "chat", id, "err", err)
	}
	return nonce
}
