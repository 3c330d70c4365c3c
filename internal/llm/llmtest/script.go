// Package llmtest holds fake model servers that speak each provider's real
// wire format (HTTP + SSE, byte for byte as the real APIs send it), scripted
// turn by turn, so provider code is tested through the official SDKs.
package llmtest

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Turn scripts one response of a fake server.
type Turn struct {
	Reasoning string     // streamed first, as reasoning / thinking deltas
	Text      string     // streamed as text deltas
	ToolCalls []ToolCall // streamed after the text, with incremental arguments
	Usage     Usage

	// Status, when not 0 or 200, answers with the provider's error body
	// instead of a stream; RetryAfter sets the Retry-After header.
	Status       int
	ErrorMessage string
	RetryAfter   time.Duration

	FirstChunkDelay time.Duration // wait before the first SSE event
	CutAfter        int           // cut the connection after this many SSE events; 0 never
	ChunkSize       int           // runes per text/argument delta; 0 means 4

	// ChunkDelay waits between consecutive SSE events; HoldAfter, when not
	// 0, keeps the stream open after that many events until the client goes
	// away (a model that stalls mid-answer). The OpenAI fakes honour both.
	ChunkDelay time.Duration
	HoldAfter  int

	// Interleave streams the argument deltas of parallel tool calls round
	// robin (every call started first) instead of one call after another,
	// where the wire format allows it (OpenAI's); other fakes ignore it.
	Interleave bool

	// Started, when not nil, is closed as the fake begins serving the
	// turn, so a test knows the model call is in progress; give each turn
	// its own channel.
	Started chan<- struct{}
	// Gate, when not nil, holds the turn back until the test closes it or
	// the client goes away: the fake sends the 200 headers and the first
	// GateAfter events (0: none; past the end of the stream, all but the
	// last) and waits; an error answer without CutAfter waits before it is
	// sent. Tests use it instead of a delay, so what they do while a call
	// is in progress never races its end.
	Gate      <-chan struct{}
	GateAfter int
	// Gone, when not nil, is closed if the client went away while the
	// fake held the turn back (Gate, HoldAfter or a delay): the client
	// cancelled the call. Give each turn its own channel.
	Gone chan<- struct{}
}

// begin tells the test, through Started, that the turn is being served.
func (t Turn) begin() {
	if t.Started != nil {
		close(t.Started)
	}
}

// away tells the test, through Gone, that the client went away while the
// turn was held back.
func (t Turn) away() {
	if t.Gone != nil {
		close(t.Gone)
	}
}

// gateAt is the index of the event the turn's Gate holds back in a stream
// of n events, or -1 when it has no gate.
func (t Turn) gateAt(n int) int {
	if t.Gate == nil {
		return -1
	}
	return min(max(t.GateAfter, 0), n-1)
}

// waitGate waits until the turn's Gate (if any) is closed, or the client
// goes away; it reports whether the client is still there.
func (t Turn) waitGate(r *http.Request) bool {
	if t.Gate == nil {
		return true
	}
	select {
	case <-t.Gate:
		return true
	case <-r.Context().Done():
		return false
	}
}

// failed reports whether the turn answers with an error.
func (t Turn) failed() bool { return t.Status != 0 && t.Status != http.StatusOK }

// ToolCall scripts one call; Args is its JSON, sent in ChunkSize pieces.
type ToolCall struct {
	ID   string
	Name string
	Args string
}

// Usage scripts the token counts a turn reports. A count left 0 is the
// fake's estimate instead: PromptTokens of the request for InputTokens,
// OutputTokens of the turn for OutputTokens.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Script is the queue of turns a fake serves, one per request, and the log
// of requests it received. A request with no turn left gets HTTP 500. A
// request whose history the real API would refuse (tool calls and results
// that do not pair up, or a malformed image or file: see content.go) gets the API's HTTP 400 and uses no turn, since the
// real API generates nothing for it; the log marks it Rejected, and the
// test's output says why.
//
// With a context window (SetContextWindow), a request whose prompt has more
// tokens than the window (see PromptTokens) gets the API's HTTP 400 for a
// prompt too long and uses no turn either; the log marks it OverWindow.
type Script struct {
	t        testing.TB // logs each refusal, so the failing test says why
	mu       sync.Mutex
	turns    []Turn
	requests []Request
	window   int // the context window in tokens; 0: none
}

// Request is one request a fake received.
type Request struct {
	Header http.Header
	Body   json.RawMessage
	At     time.Time
	// Rejected is the error message of the HTTP 400 the fake answered
	// because the request's history (its pairing of calls and results, or
	// an image or file in it) was malformed; "" when it was not.
	Rejected string
	// PromptTokens is the fake's count of the request's prompt tokens, as
	// PromptTokens estimates them; 0 for a request it could not read.
	PromptTokens int64
	// OverWindow says the fake refused the request as too long for the
	// context window.
	OverWindow bool
}

// SetContextWindow gives the fake a context window of tokens: from now on a
// request whose PromptTokens exceed it is refused with the API's error for
// a prompt too long (HTTP 400, and no turn used). 0 removes the window.
func (s *Script) SetContextWindow(tokens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = tokens
}

// MaxPromptTokens returns the largest PromptTokens of the requests received
// so far, refused ones included, so a test can check that none was over a
// window.
func (s *Script) MaxPromptTokens() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var most int64
	for _, r := range s.requests {
		most = max(most, r.PromptTokens)
	}
	return most
}

// Push appends turns to the queue.
func (s *Script) Push(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// Requests returns the requests received so far.
func (s *Script) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Rejections returns the messages of the requests refused for their
// history so far, in order.
func (s *Script) Rejections() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.requests {
		if r.Rejected != "" {
			out = append(out, r.Rejected)
		}
	}
	return out
}

// next records a request, marking it OverWindow if its prompt exceeds the
// context window, and pops the turn that answers it; a request rejected for
// its history or over the window pops none. It returns the window too, for
// the error that refuses the request.
func (s *Script) next(r *Request) (Turn, bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.OverWindow = r.Rejected == "" && s.window > 0 && r.PromptTokens > int64(s.window)
	s.requests = append(s.requests, *r)
	switch {
	case r.Rejected != "":
		s.t.Logf("llmtest: refused request %d with HTTP 400 for its history: %s", len(s.requests), r.Rejected)
		return Turn{}, false, s.window
	case r.OverWindow:
		s.t.Logf("llmtest: refused request %d with HTTP 400: its %d prompt tokens exceed the context window of %d", len(s.requests), r.PromptTokens, s.window)
		return Turn{}, false, s.window
	case len(s.turns) == 0:
		return Turn{}, false, s.window
	}
	t := s.turns[0]
	s.turns = s.turns[1:]
	return t, true, s.window
}

// Chunks splits s into pieces of n runes (n <= 0 means 4).
func Chunks(s string, n int) []string {
	if n <= 0 {
		n = 4
	}
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		k := min(n, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}

// startStream answers 200 with the headers of an SSE stream, flushed, then
// waits the turn's first-chunk delay; false if the client went away.
func startStream(w http.ResponseWriter, r *http.Request, firstChunkDelay time.Duration) (http.Flusher, bool) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	return flusher, waitFor(r, firstChunkDelay)
}

// waitFor sleeps for d, or until the client goes away; it reports whether
// the client is still there. Every fake uses it for its scripted delays.
func waitFor(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}
