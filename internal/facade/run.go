package facade

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/follow"
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
	// parts gets the deltas of the run's steps, each once and in order
	// (the follower orders them), none of a step already durable.
	parts(b *events.PartBatch) error
	// message gets each durable message of the run, possibly more than
	// once (live, then again when the run is summed up).
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

// runUntilAnswer runs start (the write that makes the chat pending) once the
// follower (internal/follow) is subscribed, and follows the run until the
// answer is ready (answerReady: the chat waits for the client's results or
// its next message, or failed). The end is also found by reading the chat
// every pollInterval, so a lost event only delays it. The run itself
// belongs to the engine, on whatever replica: if ctx ends first (the
// client went away), the run goes on, and a later request continues from
// it. baseline is the id of the last message before the run; obs may be
// nil.
//
// A structured run (tg.output) shows its client only the final
// answer's JSON as text: obs gets none of the text deltas and no message
// until the answer is ready, then every step as structuredStep shows it.
func (f *Facade) runUntilAnswer(ctx context.Context, owner string, tg target, obs observer) (outcome, error) {
	v := &runView{f: f, ctx: ctx, baseline: tg.baseline, obs: obs, structured: tg.output != nil}
	o := follow.Options{After: tg.baseline, Poll: pollInterval, Start: func(ctx context.Context) (int64, error) {
		if err := tg.start(ctx); err != nil {
			return 0, err
		}
		if obs != nil {
			return 0, obs.begin()
		}
		return 0, nil
	}}
	if obs != nil {
		o.KeepAlive = f.keepAlive
	}
	err := f.follower.Follow(ctx, owner, tg.chat.ID, v, o)
	if errors.Is(err, errAnswered) {
		return v.out, v.err
	}
	if err == nil {
		err = errors.New("follow ended") // not without an error
	}
	return outcome{}, err
}

// errAnswered ends a follow once the answer is ready.
var errAnswered = errors.New("the answer is ready")

// runView is the view a request's follow shows the run to: it hands the
// run's deltas and messages to obs, and sums the run up once the answer is
// ready.
type runView struct {
	f        *Facade
	ctx      context.Context
	baseline int64
	obs      observer
	// structured holds back text and messages until the answer is ready.
	structured bool
	out        outcome
	err        error
}

func (v *runView) Chat(c chat.Chat) error {
	if !answerReady(c) {
		return nil
	}
	v.out, v.err = v.f.finish(v.ctx, c, v.baseline, v.structured, v.obs)
	return errAnswered
}

func (v *runView) Event(ev events.ChatEvent) error {
	if v.obs == nil {
		return nil
	}
	switch {
	case ev.Kind == events.KindPart && v.structured:
		return v.obs.parts(withoutText(ev.Parts))
	case ev.Kind == events.KindPart:
		return v.obs.parts(ev.Parts)
	case ev.Kind == events.KindMessage && !v.structured:
		return v.obs.message(*ev.Message)
	}
	return nil
}

// withoutText is b without its text deltas.
func withoutText(b *events.PartBatch) *events.PartBatch {
	out := *b
	out.Deltas = nil
	for _, d := range b.Deltas {
		if d.Type != events.DeltaText {
			out.Deltas = append(out.Deltas, d)
		}
	}
	return &out
}

func (v *runView) KeepAlive() error {
	if v.obs == nil {
		return nil
	}
	return v.obs.keepAlive()
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
// it missed. A structured run's steps are as structuredStep shows them.
func (f *Facade) finish(ctx context.Context, c chat.Chat, baseline int64, structured bool, obs observer) (outcome, error) {
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
		if structured {
			m = structuredStep(m)
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
