package facade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// pollInterval is how often a followed run's chat is read again: events are
// hints, and a lost one must cost latency, never the answer.
const pollInterval = 2 * time.Second

// observer receives what a followed run streams; the non-stream answer has
// none. Its methods are called from the follower's goroutine only.
type observer interface {
	// begin is called once the write that starts the run committed: from
	// then on the answer is a stream, and errors are told inside it.
	begin() error
	// parts gets live deltas of the run's steps (and snapshots of them),
	// possibly repeated or out of order.
	parts(b *events.PartBatch) error
	// message gets each durable message of the run, possibly more than once.
	message(m chat.Message) error
	// keepAlive is called every keep-alive interval.
	keepAlive() error
}

// outcome is how a run ended: the chat as it stands, the run's assistant
// messages (those after the message the run answers), the client calls the
// chat now waits for, and the run's usage summed over its steps.
type outcome struct {
	Chat     chat.Chat
	Baseline int64
	Steps    []chat.Message
	Calls    []chat.ToolCall
	Usage    chat.Usage
}

// text joins the text of the run's steps, a blank line between steps: the
// answer as a client that sees no server-side call reads it.
func (o outcome) text() string {
	var out string
	for _, m := range o.Steps {
		if t := textOf(m); t != "" {
			if out != "" {
				out += stepSeparator
			}
			out += t
		}
	}
	return out
}

// stepSeparator stands between the texts of two steps of a run.
const stepSeparator = "\n\n"

// textOf joins the text parts of a message.
func textOf(m chat.Message) string {
	var s string
	for _, p := range m.Parts {
		if p.Type == chat.PartText {
			s += p.Text
		}
	}
	return s
}

// follow subscribes to the chat's events, runs start (the write that makes
// the chat pending), and follows the run until the answer is ready
// (answerReady: the chat waits for the client's results or its next
// message, or failed). Subscribing first means no event of the run is missed; the end
// is also found by reading the chat every pollInterval, so a lost event only
// delays it. The run itself belongs to the engine, on whatever replica: if
// ctx ends first (the client went away), the run goes on, and a later
// request continues from it. baseline is the id of the last message before
// the run; obs may be nil.
func (f *Facade) follow(ctx context.Context, owner, id string, baseline int64, start func(context.Context) error, obs observer) (outcome, error) {
	sub, err := f.ps.Subscribe(ctx, events.ChatTopic(id))
	if err != nil {
		return outcome{}, fmt.Errorf("subscribe to chat %s: %w", id, err)
	}
	defer sub.Close()
	if err := start(ctx); err != nil {
		return outcome{}, err
	}
	if obs != nil {
		if err := obs.begin(); err != nil {
			return outcome{}, err
		}
	}
	c, err := f.svc.GetChat(ctx, owner, id) // after the start: every later change is newer
	if err != nil {
		return outcome{}, err
	}
	if answerReady(c) {
		return f.finish(ctx, c, baseline, obs)
	}
	version := c.Version
	var nonce string // the snapshot request in flight
	if c.Status == chat.Running && events.DeltasStayWithWorker(f.ps) {
		nonce = f.askSnapshot(ctx, id)
	}
	poll := time.NewTicker(pollInterval)
	defer poll.Stop()
	keep := time.NewTicker(f.keepAlive)
	defer keep.Stop()
	subC := sub.C()
	reread := func() (bool, outcome, error) {
		c, err := f.svc.GetChat(ctx, owner, id)
		if err != nil {
			if ctx.Err() != nil {
				return true, outcome{}, ctx.Err()
			}
			if errors.Is(err, store.ErrNotFound) {
				return true, outcome{}, err // deleted meanwhile
			}
			f.log.Warn("openai facade: chat not read; trying again", "chat", id, "err", err)
			return false, outcome{}, nil
		}
		if !answerReady(c) {
			return false, outcome{}, nil
		}
		out, err := f.finish(ctx, c, baseline, obs)
		return true, out, err
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			return outcome{}, ctx.Err()
		case <-keep.C:
			if obs != nil {
				err = obs.keepAlive()
			}
		case <-poll.C:
			if done, out, err := reread(); done {
				return out, err
			}
		case m, ok := <-subC:
			if !ok || m.Missed {
				if !ok {
					subC = nil // lagged or closed: the polls go on alone
				}
				if done, out, err := reread(); done {
					return out, err
				}
				continue
			}
			var ev events.ChatEvent
			if json.Unmarshal(m.Payload, &ev) != nil {
				continue
			}
			switch ev.Kind {
			case events.KindStatus:
				// A running status heard here announces a run after the start
				// (the chat was not running before it), whatever its version:
				// its worker listens by then, while a request sent when the
				// read found the chat running may have come before it did,
				// and been lost.
				if ev.Chat != nil && ev.Chat.Status == chat.Running && events.DeltasStayWithWorker(f.ps) {
					nonce = f.askSnapshot(ctx, id)
				}
				if ev.Chat == nil || ev.Chat.Version <= version {
					continue // older than what the start left: another run's
				}
				version = ev.Chat.Version
				if ev.Chat.Status != chat.Running && ev.Chat.Status != chat.Pending {
					if done, out, err := reread(); done {
						return out, err
					}
				}
			case events.KindPart:
				if obs != nil && ev.Parts != nil && ev.Parts.MessageID > baseline {
					err = obs.parts(ev.Parts)
				}
			case events.KindSnapshot:
				if obs != nil && nonce != "" && ev.Nonce == nonce && ev.Parts != nil && ev.Parts.MessageID > baseline {
					nonce = ""
					err = obs.parts(ev.Parts)
				}
			case events.KindMessage:
				if obs != nil && ev.Message != nil && ev.Message.ID > baseline {
					err = obs.message(*ev.Message)
				}
			}
		}
		if err != nil {
			return outcome{}, err
		}
	}
}

// answerReady reports whether the request that follows the chat's run can
// be answered: the run ended (waiting for the next message, or in error),
// or it stopped for the client's results, which the answer's tool calls
// ask for. A chat that waits only for a person's approval is not: it goes
// on once the decision is given (parley's API).
func answerReady(c chat.Chat) bool {
	switch c.Status {
	case chat.Waiting, chat.Error:
		return true
	case chat.RequiresAction:
		return c.RequiredAction != nil && len(chat.OfKind(c.RequiredAction.ToolCalls, chat.ActionClient)) > 0
	}
	return false
}

// finish reads what the run wrote and sums it up; obs gets every durable
// message of the run, so a stream ends holding all of it whatever deltas
// it missed.
func (f *Facade) finish(ctx context.Context, c chat.Chat, baseline int64, obs observer) (outcome, error) {
	out := outcome{Chat: c, Baseline: baseline}
	err := store.ForEachMessage(ctx, f.st, c.ID, baseline, func(m chat.Message) error {
		if m.Role != chat.RoleAssistant {
			return nil
		}
		if m.Usage != nil {
			out.Usage = out.Usage.Add(*m.Usage) // a compaction's too: it was spent answering
		}
		if chat.IsCompaction(m) {
			return nil // not an answer: the run summarised the conversation first
		}
		out.Steps = append(out.Steps, m)
		if obs != nil {
			return obs.message(m)
		}
		return nil
	})
	if err != nil {
		return outcome{}, fmt.Errorf("read the run of chat %s: %w", c.ID, err)
	}
	if c.Status == chat.RequiresAction && c.RequiredAction != nil {
		out.Calls = chat.OfKind(c.RequiredAction.ToolCalls, chat.ActionClient)
	}
	return out, nil
}

// askSnapshot asks the chat's worker for a snapshot (events.AskSnapshot),
// logging a request that could not be sent.
func (f *Facade) askSnapshot(ctx context.Context, id string) string {
	nonce, err := events.AskSnapshot(ctx, f.ps, id)
	if err != nil {
		f.log.Warn("openai facade: snapshot request not published", "chat", id, "err", err)
	}
	return nonce
}
