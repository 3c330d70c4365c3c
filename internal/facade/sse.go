package facade

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/jsonscan"
)

// requestBody is a /v1 request: it checks itself and names its model.
type requestBody interface {
	check() error
	model() string
}

func (r *completionRequest) model() string { return r.Model }
func (r *responsesRequest) model() string  { return r.Model }

// readRequest decodes a request body (at most limits.max_body_bytes, as in
// parley's own API: 413 beyond), checks it, and reads its model for owner
// (a configured model or one of the owner's agents), answering in OpenAI's
// error shape.
// The body is held to what parley's API takes (jsonscan): nested at most
// jsonscan.MaxDepth deep, no string holding U+0000, whichever database
// stores it.
func (f *Facade) readRequest(w http.ResponseWriter, r *http.Request, owner string, req requestBody) (runModel, error) {
	if err := f.decodeRequest(w, r, req); err != nil {
		return runModel{}, err
	}
	return f.resolveModel(r.Context(), owner, req.model())
}

// decodeRequest decodes and checks a request body (readRequest).
func (f *Facade) decodeRequest(w http.ResponseWriter, r *http.Request, req requestBody) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, f.cfg.Limits.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "body_too_large",
				Message: fmt.Sprintf("The request body is larger than %d bytes (limits.max_body_bytes).", tooBig.Limit)}
		}
		return invalid("", "the request body could not be read: %v", err)
	}
	tooDeep, nul := jsonscan.Scan(body)
	if tooDeep != nil {
		return invalid(tooDeep.Field, "%s", tooDeep.Error())
	}
	if err := json.Unmarshal(body, req); err != nil {
		return invalid("", "We could not parse the JSON body of your request: %v", err)
	}
	if nul != nil {
		return invalid(nul.Field, "%s", nul.Error())
	}
	return req.check()
}

// streamView is what one API shows of a streamed run, in its own shapes.
// The runStream that feeds it has put the run's deltas in order, each once,
// and kept server-side calls out: a view sees the client's calls only.
type streamView interface {
	// opening sends the stream's first events, once the run started.
	opening() error
	// text sends text step m wrote.
	text(m int64, t string) error
	// startCall sends the start of a client call; moreArgs more of its
	// arguments.
	startCall(id, name string) error
	moreArgs(id, more string) error
	// durable sends, from a step's durable message (given once), whatever
	// of it was not streamed.
	durable(m chat.Message) error
	// end sends the last events of a run that ended; fail those of a run
	// that failed, or of a stream that could not go on.
	end(out outcome) error
	fail(e *apiError, u chat.Usage)
}

// runStream follows one run for a streamed answer (it is the run's
// observer): it hides the server-side calls, and hands the rest to its
// view, which writes to out, each durable message once.
type runStream struct {
	out     *sseOut
	durable map[int64]bool // messages handed to the view
	view    streamView
	client  map[string]bool          // the chat's dynamic tools: the calls the client sees
	calls   map[int64]map[int]string // message id -> delta index -> client call id ("": a server-side call)
}

func newRunStream(out *sseOut, client map[string]bool, view streamView) *runStream {
	return &runStream{out: out, durable: map[int64]bool{}, view: view, client: client, calls: map[int64]map[int]string{}}
}

func (s *runStream) begin() error {
	s.out.start()
	return s.view.opening()
}

func (s *runStream) keepAlive() error { return s.out.keepAlive() }

func (s *runStream) parts(b *events.PartBatch) error {
	for _, d := range b.Deltas {
		if err := s.apply(b.MessageID, d); err != nil {
			return err
		}
	}
	return nil
}

// apply hands one delta of message m to the view.
func (s *runStream) apply(m int64, d events.Delta) error {
	switch d.Type {
	case events.DeltaText:
		return s.view.text(m, d.Text)
	case events.DeltaToolCallStart:
		if s.calls[m] == nil {
			s.calls[m] = map[int]string{}
		}
		if !s.client[d.ToolName] {
			s.calls[m][d.Index] = "" // server-side: never shown
			return nil
		}
		s.calls[m][d.Index] = d.ToolCallID
		return s.view.startCall(d.ToolCallID, d.ToolName)
	case events.DeltaToolCallDelta:
		if id := s.calls[m][d.Index]; id != "" {
			return s.view.moreArgs(id, d.Text)
		}
	}
	return nil // reasoning is not shown
}

func (s *runStream) message(m chat.Message) error {
	if m.Role != chat.RoleAssistant || s.durable[m.ID] {
		return nil
	}
	s.durable[m.ID] = true
	return s.view.durable(m)
}

// stream follows the run of tg and streams it through s. Errors before
// the run starts are HTTP errors; after, the view's failure events end the
// stream.
func (f *Facade) stream(r *http.Request, owner string, tg target, s *runStream) error {
	out, err := f.runUntilAnswer(r.Context(), owner, tg, s)
	switch {
	case !s.out.begun:
		return err // nothing sent yet: an HTTP error
	case err != nil:
		if r.Context().Err() == nil {
			f.log.Warn("openai facade: stream ended early", "chat", tg.chat.ID, "err", err)
			s.view.fail(toAPIError(err), out.Usage)
		}
		return nil
	case out.Chat.Status == chat.Error:
		s.view.fail(runFailed(out.Chat), out.Usage)
		return nil
	}
	_ = s.view.end(out)
	return nil
}

// sseOut writes the frames of a server-sent event stream, each flushed at
// once; begun says whether the answer's header went out (after it, errors
// are told inside the stream).
type sseOut struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	begun bool
}

func newSSEOut(w http.ResponseWriter) *sseOut {
	return &sseOut{w: w, rc: http.NewResponseController(w)}
}

// start sends the stream's header.
func (o *sseOut) start() {
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
	o.begun = true
}

func (o *sseOut) keepAlive() error { return o.write(": keep-alive\n\n") }

func (o *sseOut) write(frame string) error {
	if _, err := o.w.Write([]byte(frame)); err != nil {
		return err
	}
	return o.rc.Flush()
}
