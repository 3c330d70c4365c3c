package facade

import (
	"encoding/json"
	"io"
	"net/http"

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

// readRequest decodes a request body (at most maxBody), checks it, and
// checks that its model is configured, answering in OpenAI's error shape.
// The body is held to what parley's API takes (jsonscan): nested at most
// jsonscan.MaxDepth deep, no string holding U+0000, whichever database
// stores it.
func (f *Facade) readRequest(w http.ResponseWriter, r *http.Request, req requestBody) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
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
	if err := req.check(); err != nil {
		return err
	}
	if _, ok := f.cfg.FindModel(req.model()); !ok {
		return modelNotFound(req.model())
	}
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

func newSSEOut(w http.ResponseWriter) sseOut {
	return sseOut{w: w, rc: http.NewResponseController(w)}
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

// deltaOrder applies the deltas of a run's steps in order, each once,
// though batches may come repeated or out of order (live, and from
// snapshots): a batch that would leave a gap waits for the missing deltas,
// or for the step's durable message, after which the step's deltas are
// moot (the message carries what was not streamed).
type deltaOrder struct {
	sent    map[int64]int                 // message id -> deltas applied
	held    map[int64][]*events.PartBatch // batches that came early
	durable map[int64]bool                // messages whose durable copy was taken
}

func newDeltaOrder() deltaOrder {
	return deltaOrder{sent: map[int64]int{}, held: map[int64][]*events.PartBatch{}, durable: map[int64]bool{}}
}

// feed applies the deltas of b not applied yet, then the held batches that
// now follow on.
func (o *deltaOrder) feed(b *events.PartBatch, apply func(m int64, d events.Delta) error) error {
	m := b.MessageID
	if o.durable[m] || b.Seq+len(b.Deltas) <= o.sent[m] {
		return nil
	}
	if b.Seq > o.sent[m] {
		o.held[m] = append(o.held[m], b)
		return nil
	}
	for _, d := range b.Deltas[o.sent[m]-b.Seq:] {
		if err := apply(m, d); err != nil {
			return err
		}
		o.sent[m]++
	}
	held := o.held[m]
	o.held[m] = nil
	for _, h := range held {
		if err := o.feed(h, apply); err != nil {
			return err
		}
	}
	return nil
}

// settle records that message id is durable and reports whether it was
// not already: its deltas are dropped from then on.
func (o *deltaOrder) settle(id int64) bool {
	if o.durable[id] {
		return false
	}
	o.durable[id] = true
	delete(o.held, id)
	return true
}
