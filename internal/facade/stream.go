package facade

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
)

// streamRun follows a run and streams it as chat.completion.chunk events
// (data-only server-sent events ending with data: [DONE]). Errors before
// the run starts are HTTP errors; after, an error event ends the stream.
func (f *Facade) streamRun(w http.ResponseWriter, r *http.Request, owner string, tg target, resp *responder) error {
	cs := &chunkStream{sseOut: newSSEOut(w), deltaOrder: newDeltaOrder(), r: resp, text: map[int64]string{},
		byIndex: map[int64]map[int]*streamedCall{}, calls: map[string]*streamedCall{}}
	out, err := f.follow(r.Context(), owner, tg.chat.ID, tg.baseline, tg.start, cs)
	switch {
	case !cs.begun:
		return err // nothing sent yet: an HTTP error
	case err != nil:
		if r.Context().Err() == nil {
			f.log.Warn("openai facade: stream ended early", "chat", tg.chat.ID, "err", err)
			cs.fail(toAPIError(err))
		}
		return nil
	case out.Chat.Status == chat.Error:
		cs.fail(runFailed(out.Chat))
		return nil
	}
	_ = cs.end(out)
	return nil
}

// chunkStream writes one run as chunks: the steps' deltas in order, each
// once (deltaOrder), then from each step's durable message whatever was not
// streamed. Only the client's calls are shown: a server-side call streams
// nothing.
type chunkStream struct {
	sseOut
	deltaOrder
	r *responder

	text    map[int64]string // message id -> text sent
	anyText bool
	byIndex map[int64]map[int]*streamedCall // message id -> delta index -> client call (nil: a server-side one)
	calls   map[string]*streamedCall        // by tool call id
	next    int                             // the index of the next client call
}

// streamedCall is a client call being streamed.
type streamedCall struct {
	index int
	args  string // sent so far
}

func (s *chunkStream) begin() error {
	s.start()
	return s.delta(map[string]any{"role": "assistant", "content": "", "refusal": nil})
}

func (s *chunkStream) parts(b *events.PartBatch) error { return s.feed(b, s.apply) }

// apply sends one delta of message m.
func (s *chunkStream) apply(m int64, d events.Delta) error {
	switch d.Type {
	case events.DeltaText:
		return s.sendText(m, d.Text)
	case events.DeltaToolCallStart:
		if s.byIndex[m] == nil {
			s.byIndex[m] = map[int]*streamedCall{}
		}
		if !s.r.client[d.ToolName] {
			s.byIndex[m][d.Index] = nil // server-side: never shown
			return nil
		}
		c := &streamedCall{index: s.next}
		s.next++
		s.byIndex[m][d.Index], s.calls[d.ToolCallID] = c, c
		return s.startCall(c, d.ToolCallID, d.ToolName, "")
	case events.DeltaToolCallDelta:
		if c := s.byIndex[m][d.Index]; c != nil {
			return s.moreArgs(c, d.Text)
		}
	}
	return nil // reasoning is not shown
}

func (s *chunkStream) message(m chat.Message) error {
	if m.Role != chat.RoleAssistant || !s.settle(m.ID) {
		return nil
	}
	if full, sent := textOf(m), s.text[m.ID]; strings.HasPrefix(full, sent) {
		if err := s.sendText(m.ID, full[len(sent):]); err != nil {
			return err
		}
	}
	for _, p := range m.Parts {
		if p.Type != chat.PartToolCall || !s.r.client[p.ToolName] {
			continue
		}
		args := argsString(p.Args)
		c := s.calls[p.ToolCallID]
		if c == nil {
			c = &streamedCall{index: s.next}
			s.next++
			s.calls[p.ToolCallID] = c
			if err := s.startCall(c, p.ToolCallID, p.ToolName, args); err != nil {
				return err
			}
			continue
		}
		if strings.HasPrefix(args, c.args) && len(args) > len(c.args) {
			if err := s.moreArgs(c, args[len(c.args):]); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendText sends text of message m; the first text of a step after text
// of an earlier one comes after a blank line, as in the non-stream answer.
func (s *chunkStream) sendText(m int64, t string) error {
	if t == "" {
		return nil
	}
	out := t
	if s.text[m] == "" && s.anyText {
		out = stepSeparator + t
	}
	s.text[m] += t
	s.anyText = true
	return s.delta(map[string]any{"content": out})
}

func (s *chunkStream) startCall(c *streamedCall, id, name, args string) error {
	call := outToolCall{Index: &c.index, ID: id, Type: "function"}
	call.Function.Name, call.Function.Arguments = name, args
	c.args = args
	return s.delta(map[string]any{"tool_calls": []outToolCall{call}})
}

func (s *chunkStream) moreArgs(c *streamedCall, more string) error {
	call := outToolCall{Index: &c.index}
	call.Function.Arguments = more
	c.args += more
	return s.delta(map[string]any{"tool_calls": []outToolCall{call}})
}

// delta sends a chunk with one choice whose delta is d.
func (s *chunkStream) delta(d map[string]any) error {
	return s.chunk([]map[string]any{{"index": 0, "delta": d, "logprobs": nil, "finish_reason": nil}}, nil)
}

// chunk sends one chat.completion.chunk; with include_usage every chunk
// has a usage, null but in the last.
func (s *chunkStream) chunk(choices []map[string]any, u *usage) error {
	c := map[string]any{"id": s.r.id, "object": "chat.completion.chunk", "created": s.r.created,
		"model": s.r.model, "system_fingerprint": nil, "choices": choices}
	if s.r.usage {
		c["usage"] = u
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.write("data: " + string(b) + "\n\n")
}

// end sends the chunk with the finish reason, the usage chunk when asked
// for, and [DONE].
func (s *chunkStream) end(out outcome) error {
	fin := []map[string]any{{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": finishReason(out)}}
	if err := s.chunk(fin, nil); err != nil {
		return err
	}
	if s.r.usage {
		u := usageOf(out.Usage)
		if err := s.chunk([]map[string]any{}, &u); err != nil {
			return err
		}
	}
	return s.write("data: [DONE]\n\n")
}

// fail ends the stream with an error event, as OpenAI's streams do.
func (s *chunkStream) fail(e *apiError) {
	b, _ := json.Marshal(map[string]*apiError{"error": e})
	_ = s.write("data: " + string(b) + "\n\n")
}
