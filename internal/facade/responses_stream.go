package facade

import (
	"encoding/json"
	"net/http"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
)

// streamResponse follows a run and streams it as Responses events: one
// lifecycle (response.created … response.completed or response.failed)
// for all the run's steps. Errors before the run starts are HTTP errors;
// after, response.failed ends the stream.
func (f *Facade) streamResponse(w http.ResponseWriter, r *http.Request, owner string, tg target, resp *respResponder) error {
	es := &eventStream{sseOut: newSSEOut(w), deltaOrder: newDeltaOrder(), r: resp, byIndex: map[int64]map[int]*outItem{}}
	es.b = newOutputBuilder(resp, es.event)
	out, err := f.follow(r.Context(), owner, tg.chat.ID, tg.baseline, tg.start, es)
	switch {
	case !es.begun:
		return err // nothing sent yet: an HTTP error
	case err != nil:
		if r.Context().Err() == nil {
			f.log.Warn("openai facade: response stream ended early", "chat", tg.chat.ID, "err", err)
			es.fail(toAPIError(err), out.Usage)
		}
		return nil
	case out.Chat.Status == chat.Error:
		es.fail(runFailed(out.Chat), out.Usage)
		return nil
	}
	items, err := es.b.end()
	if err != nil {
		return nil // the client is gone
	}
	_ = es.event("response.completed", map[string]any{"response": resp.object("completed", items, &out.Usage, nil)})
	return nil
}

// eventStream writes one run as Responses events: the steps' deltas in
// order, each once (deltaOrder), then from each step's durable message
// whatever was not streamed. Only the client's calls are shown.
type eventStream struct {
	sseOut
	deltaOrder
	r   *respResponder
	b   *outputBuilder
	seq int

	byIndex map[int64]map[int]*outItem // message id -> delta index -> client call (nil: a server-side one)
}

func (s *eventStream) begin() error {
	s.start()
	if err := s.event("response.created", map[string]any{"response": s.r.object("in_progress", nil, nil, nil)}); err != nil {
		return err
	}
	return s.event("response.in_progress", map[string]any{"response": s.r.object("in_progress", nil, nil, nil)})
}

func (s *eventStream) parts(b *events.PartBatch) error { return s.feed(b, s.apply) }

// apply adds one delta of message m.
func (s *eventStream) apply(m int64, d events.Delta) error {
	switch d.Type {
	case events.DeltaText:
		return s.b.addText(m, d.Text)
	case events.DeltaToolCallStart:
		if s.byIndex[m] == nil {
			s.byIndex[m] = map[int]*outItem{}
		}
		if !s.r.client[d.ToolName] {
			s.byIndex[m][d.Index] = nil // server-side: never shown
			return nil
		}
		if err := s.b.startCall(d.ToolCallID, d.ToolName, ""); err != nil {
			return err
		}
		s.byIndex[m][d.Index] = s.b.calls[d.ToolCallID]
	case events.DeltaToolCallDelta:
		if it := s.byIndex[m][d.Index]; it != nil {
			return s.b.moreArgs(it, d.Text)
		}
	}
	return nil // reasoning is not shown
}

func (s *eventStream) message(m chat.Message) error {
	if m.Role != chat.RoleAssistant || !s.settle(m.ID) {
		return nil
	}
	return s.b.message(m)
}

// event sends one event, numbered from 0.
func (s *eventStream) event(typ string, fields map[string]any) error {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	return s.write("event: " + typ + "\ndata: " + string(b) + "\n\n")
}

// fail ends the stream with response.failed, the output so far in it.
func (s *eventStream) fail(e *apiError, u chat.Usage) {
	items, err := s.b.end()
	if err != nil {
		return
	}
	_ = s.event("response.failed", map[string]any{"response": s.r.object("failed", items, &u, e)})
}
