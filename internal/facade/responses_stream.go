package facade

import (
	"encoding/json"
	"net/http"

	"github.com/parleyhq/parley/internal/chat"
)

// streamResponse streams the run of tg as Responses events: one lifecycle
// (response.created … response.completed or response.failed) for all the
// run's steps.
func (f *Facade) streamResponse(w http.ResponseWriter, r *http.Request, owner string, tg target, resp *respResponder) error {
	out := newSSEOut(w)
	v := &eventView{out: out, r: resp}
	v.b = newOutputBuilder(resp, v.event)
	return f.stream(r, owner, tg, newRunStream(out, resp.client, v))
}

// eventView shows a streamed run as Responses events, its output items
// built as they stream (outputBuilder).
type eventView struct {
	out *sseOut
	r   *respResponder
	b   *outputBuilder
	seq int
}

func (s *eventView) opening() error {
	if err := s.event("response.created", map[string]any{"response": s.r.object("in_progress", nil, nil, nil)}); err != nil {
		return err
	}
	return s.event("response.in_progress", map[string]any{"response": s.r.object("in_progress", nil, nil, nil)})
}

func (s *eventView) text(m int64, t string) error { return s.b.addText(m, t) }

func (s *eventView) startCall(id, name string) error { return s.b.startCall(id, name, "") }

func (s *eventView) moreArgs(id, more string) error {
	if it := s.b.calls[id]; it != nil {
		return s.b.moreArgs(it, more)
	}
	return nil
}

func (s *eventView) durable(m chat.Message) error { return s.b.message(m) }

// end closes every item and sends response.completed.
func (s *eventView) end(out outcome) error {
	items, err := s.b.end()
	if err != nil {
		return err // the client is gone
	}
	return s.event("response.completed", map[string]any{"response": s.r.object("completed", items, &out.Usage, nil)})
}

// event sends one event, numbered from 0.
func (s *eventView) event(typ string, fields map[string]any) error {
	fields["type"] = typ
	fields["sequence_number"] = s.seq
	s.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	return s.out.write("event: " + typ + "\ndata: " + string(b) + "\n\n")
}

// fail ends the stream with response.failed, the output so far in it.
func (s *eventView) fail(e *apiError, u chat.Usage) {
	items, err := s.b.end()
	if err != nil {
		return
	}
	_ = s.event("response.failed", map[string]any{"response": s.r.object("failed", items, &u, e)})
}
