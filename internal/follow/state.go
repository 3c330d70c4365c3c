package follow

import (
	"errors"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
)

// errTooFarBehind ends a follow that would hold more deltas than allowed.
var errTooFarBehind = errors.New("too many deltas held")

// state is what one follow has shown its view, so nothing is shown twice
// or out of order: messages up to lastMsg, each message's deltas below
// seq, and the chat up to version. Deltas that do not follow on from what
// was shown are held until the missing ones arrive (the snapshot), or the
// durable message makes them moot.
type state struct {
	view      View
	keepAlive func() error

	lastMsg int64
	seq     map[int64]int // message id -> deltas shown
	// version is the Version of the chat last shown: an older or the same
	// chat (a change already shown, delivered late) is dropped.
	version int64

	nonce   string              // the snapshot request in flight, "" if none
	holding bool                // hold every delta until the snapshot (or its timeout)
	held    []*events.PartBatch // batches not shown yet, in arrival order
	nHeld   int
}

// chat shows c if it is newer than the chat last shown. A chat without a
// version (from a replica older than versions) counts as newer: nothing
// can be told of it.
func (s *state) chat(c chat.Chat) error {
	if c.Version != 0 && c.Version <= s.version {
		return nil
	}
	s.version = max(s.version, c.Version)
	if c.Status != chat.Running {
		// No run goes on: deltas still held can never be completed; the
		// durable messages carry what the run kept.
		s.held, s.nHeld, s.nonce, s.holding = nil, 0, "", false
	}
	return s.view.Chat(c)
}

// message shows m if it comes after the last message shown.
func (s *state) message(m chat.Message) error {
	if m.ID <= s.lastMsg {
		return nil
	}
	s.lastMsg = m.ID
	delete(s.seq, m.ID)
	return s.view.Event(events.ChatEvent{Kind: events.KindMessage, Message: &m})
}

// parts shows the deltas of b not shown yet, or holds b if showing it
// would leave a gap.
func (s *state) parts(b *events.PartBatch) error {
	if b == nil || b.MessageID == 0 || b.MessageID <= s.lastMsg {
		return nil // between steps, or the message is durable already
	}
	shown := s.seq[b.MessageID]
	if s.holding || b.Seq > shown {
		s.held = append(s.held, b)
		if s.nHeld += len(b.Deltas); s.nHeld > maxHeldDeltas {
			return errTooFarBehind
		}
		return nil
	}
	if b.Seq+len(b.Deltas) <= shown {
		return nil // nothing new
	}
	fresh := &events.PartBatch{MessageID: b.MessageID, Seq: shown, Deltas: b.Deltas[shown-b.Seq:]}
	s.seq[b.MessageID] = b.Seq + len(b.Deltas)
	return s.view.Event(events.ChatEvent{Kind: events.KindPart, Parts: fresh})
}

// flushHeld shows the held batches that now follow on from what was
// shown, repeating until none does; the others stay held.
func (s *state) flushHeld() error {
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

// live handles one live event.
func (s *state) live(ev events.ChatEvent) error {
	switch ev.Kind {
	case events.KindSnapshot:
		if s.nonce == "" || ev.Nonce != s.nonce || ev.Parts == nil {
			return nil // another follow's, or an earlier request's
		}
		s.nonce, s.holding = "", false
		if err := s.parts(ev.Parts); err != nil {
			return err
		}
		return s.flushHeld()
	case events.KindStatus:
		if ev.Chat == nil {
			return nil
		}
		return s.chat(*ev.Chat)
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
	}
	return s.view.Event(ev)
}
