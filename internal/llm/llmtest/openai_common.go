package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// openaiFake is what the two OpenAI fakes share: the script, the server,
// and everything about a request up to its stream of events.
type openaiFake struct {
	*Script
	URL string // base URL for the SDK (option.WithBaseURL), ending in /v1

	path   string // the endpoint below /v1: "/chat/completions" or "/responses"
	events func(t Turn, req openaiRequest, id int64) []openaiEvent
	// streamError is the API's mid-stream error frame, sent as event number seq.
	streamError func(t Turn, seq int) openaiEvent
	// history is why the API would refuse the request's conversation, or nil.
	history func(req openaiRequest) *historyError
	// promptTokens counts the request's prompt tokens (see PromptTokens).
	promptTokens func(req openaiRequest) int64
	// tooLong is the API's error object for a prompt of that many tokens
	// over a context window of window tokens.
	tooLong func(prompt int64, window int) openaiObj
	ids     atomic.Int64
}

// openaiRequest is what the fakes read of a request body.
type openaiRequest struct {
	Model         string          `json:"model"`
	Stream        bool            `json:"stream"`
	StreamOptions json.RawMessage `json:"stream_options"`
	raw           map[string]json.RawMessage
}

// field returns the raw JSON of a top-level field of the request, or null.
func (r openaiRequest) field(name string) json.RawMessage {
	if v, ok := r.raw[name]; ok {
		return v
	}
	return json.RawMessage("null")
}

// openaiEvent is one server-sent event; name is "" for the data-only events
// of Chat Completions.
type openaiEvent struct {
	name string
	data string
}

// start serves f on a test server closed when t ends.
func (f *openaiFake) start(t testing.TB) {
	f.Script = &Script{t: t}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL + "/v1"
}

// serve answers one request.
func (f *openaiFake) serve(w http.ResponseWriter, r *http.Request) {
	n := f.ids.Add(1)
	w.Header().Set("x-request-id", fmt.Sprintf("req_fake%06d", n))
	w.Header().Set("openai-version", "2020-10-01")
	w.Header().Set("openai-processing-ms", "1")
	if r.Method != http.MethodPost || (r.URL.Path != "/v1"+f.path && r.URL.Path != f.path) {
		openaiError(w, http.StatusNotFound, fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), 0)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req openaiRequest
	jsonErr := json.Unmarshal(body, &req)
	if jsonErr == nil {
		jsonErr = json.Unmarshal(body, &req.raw)
	}
	authorized := strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ")
	logged := Request{Header: r.Header.Clone(), Body: body, At: time.Now()}
	var bad *historyError
	if authorized && jsonErr == nil {
		bad = f.history(req)
		logged.PromptTokens = f.promptTokens(req)
	}
	if bad != nil {
		logged.Rejected = bad.message
	}
	turn, ok, window := f.next(&logged)
	if ok {
		turn.begin()
	}
	switch {
	case !authorized:
		openaiError(w, http.StatusUnauthorized, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", 0)
		return
	case jsonErr != nil:
		openaiError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", 0)
		return
	case bad != nil:
		writeOpenAIError(w, http.StatusBadRequest, openaiErrorObject(http.StatusBadRequest, bad.message, bad.param), 0)
		return
	case logged.OverWindow:
		writeOpenAIError(w, http.StatusBadRequest, f.tooLong(logged.PromptTokens, window), 0)
		return
	case !req.Stream:
		openaiError(w, http.StatusBadRequest, "llmtest: only streaming requests are supported", 0)
		return
	case !ok:
		openaiError(w, http.StatusInternalServerError, "llmtest: no scripted turn left", 0)
		return
	}
	failed := turn.failed()
	if failed && turn.CutAfter == 0 {
		if !waitFor(r, turn.FirstChunkDelay) || !turn.waitGate(r) {
			turn.away()
			return
		}
		openaiError(w, turn.Status, turn.ErrorMessage, turn.RetryAfter)
		return
	}

	flusher, ok := startStream(w, r, turn.FirstChunkDelay)
	if !ok {
		turn.away()
		return
	}
	turn.Usage = turn.usage(logged.PromptTokens)
	evs := f.events(turn, req, n)
	gate := turn.gateAt(len(evs))
	for i, ev := range evs {
		if i == gate && !turn.waitGate(r) {
			turn.away()
			return
		}
		if turn.HoldAfter > 0 && i == turn.HoldAfter {
			<-r.Context().Done()
			turn.away()
			return
		}
		if i > 0 && !waitFor(r, turn.ChunkDelay) {
			turn.away()
			return
		}
		if turn.CutAfter > 0 && i == turn.CutAfter {
			if failed {
				writeOpenAIEvent(w, f.streamError(turn, i))
				flusher.Flush()
				return
			}
			panic(http.ErrAbortHandler) // drop the connection without ending the chunked body
		}
		writeOpenAIEvent(w, ev)
		flusher.Flush()
	}
}

func writeOpenAIEvent(w io.Writer, ev openaiEvent) {
	if ev.name != "" {
		fmt.Fprintf(w, "event: %s\n", ev.name)
	}
	fmt.Fprintf(w, "data: %s\n\n", ev.data)
}

// openaiError writes the API's error answer. Retry-After goes out in whole
// seconds (rounded up); a delay with a fraction of a second also gets the
// retry-after-ms header that OpenAI-compatible servers such as Azure send.
func openaiError(w http.ResponseWriter, status int, message string, retryAfter time.Duration) {
	writeOpenAIError(w, status, openaiErrorObject(status, message, nil), retryAfter)
}

// writeOpenAIError writes an error answer with the error object e.
func writeOpenAIError(w http.ResponseWriter, status int, e openaiObj, retryAfter time.Duration) {
	if retryAfter > 0 {
		w.Header().Set("retry-after", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
		if retryAfter%time.Second != 0 {
			w.Header().Set("retry-after-ms", strconv.FormatInt(retryAfter.Milliseconds(), 10))
		}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	body := openaiObj{{"error", e}}
	data, _ := json.MarshalIndent(body, "", "    ") // the API pretty-prints its error bodies
	_, _ = w.Write(append(data, '\n'))
}

// openaiErrorObject is the API's error object for status: message, type,
// param (the request field at fault; nil for none), code.
func openaiErrorObject(status int, message string, param any) openaiObj {
	typ, code, msg := "invalid_request_error", any(nil), "Invalid request."
	switch {
	case status == http.StatusUnauthorized:
		code, msg = "invalid_api_key", "Incorrect API key provided: sk-fake. You can find your API key at https://platform.openai.com/account/api-keys."
	case status == http.StatusNotFound:
		code, msg = "model_not_found", "The model does not exist or you do not have access to it."
	case status == http.StatusTooManyRequests:
		typ, code, msg = "requests", "rate_limit_exceeded", "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s."
	case status == http.StatusServiceUnavailable:
		typ, msg = "server_error", "The engine is currently overloaded, please try again later."
	case status >= 500:
		typ, msg = "server_error", "The server had an error while processing your request. Sorry about that!"
	}
	if message != "" {
		msg = message
	}
	return openaiObj{{"message", msg}, {"type", typ}, {"param", param}, {"code", code}}
}

// openaiObj is a JSON object that keeps its fields in order, as the API
// writes them.
type openaiObj []openaiField

type openaiField struct {
	key   string
	value any
}

// MarshalJSON writes the fields in order.
func (o openaiObj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// openaiJSON marshals v, which the fakes build themselves.
func openaiJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

// openaiCallID is a tool call's id: the scripted one, or a made-up one.
func openaiCallID(c ToolCall, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("call_fake%02d", i)
}

// openaiArgStep is one argument delta of a turn's tool calls.
type openaiArgStep struct {
	call  int
	piece string
}

// openaiArgSteps orders the argument deltas of a turn's tool calls: call
// after call, or round robin with Interleave.
func openaiArgSteps(t Turn) []openaiArgStep {
	pieces := make([][]string, len(t.ToolCalls))
	most := 0
	for i, c := range t.ToolCalls {
		pieces[i] = Chunks(c.Args, t.ChunkSize)
		most = max(most, len(pieces[i]))
	}
	var steps []openaiArgStep
	if t.Interleave {
		for p := range most {
			for c := range pieces {
				if p < len(pieces[c]) {
					steps = append(steps, openaiArgStep{c, pieces[c][p]})
				}
			}
		}
		return steps
	}
	for c := range pieces {
		for _, piece := range pieces[c] {
			steps = append(steps, openaiArgStep{c, piece})
		}
	}
	return steps
}
