package facade

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
)

// streamRun streams the run of tg as chat.completion.chunk events
// (data-only server-sent events ending with data: [DONE]).
func (f *Facade) streamRun(w http.ResponseWriter, r *http.Request, owner string, tg target, resp *responder) error {
	out := newSSEOut(w)
	v := &chunkView{out: out, r: resp, sent: map[int64]string{}, calls: map[string]*streamedCall{}}
	return f.stream(r, owner, tg, newRunStream(out, resp.client, v))
}

// chunkView shows a streamed run as chunks: the text of its steps, a blank
// line between them, and the client's calls, each with its index among
// them.
type chunkView struct {
	out     *sseOut
	r       *responder
	sent    map[int64]string // message id -> text sent
	anyText bool
	calls   map[string]*streamedCall // by tool call id
	next    int                      // the index of the next client call
}

// streamedCall is a client call being streamed.
type streamedCall struct {
	index int
	args  string // sent so far
}

func (s *chunkView) opening() error {
	return s.delta(map[string]any{"role": "assistant", "content": "", "refusal": nil})
}

func (s *chunkView) text(m int64, t string) error { return s.sendText(m, t) }

func (s *chunkView) startCall(id, name string) error {
	return s.sendCall(id, name, "")
}

func (s *chunkView) moreArgs(id, more string) error {
	if c := s.calls[id]; c != nil {
		return s.sendArgs(c, more)
	}
	return nil
}

func (s *chunkView) durable(m chat.Message) error {
	if full, sent := textOf(m), s.sent[m.ID]; strings.HasPrefix(full, sent) {
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
			if err := s.sendCall(p.ToolCallID, p.ToolName, args); err != nil {
				return err
			}
			continue
		}
		if strings.HasPrefix(args, c.args) && len(args) > len(c.args) {
			if err := s.sendArgs(c, args[len(c.args):]); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendText sends text of message m; the first text of a step after text
// of an earlier one comes after a blank line, as in the non-stream answer.
func (s *chunkView) sendText(m int64, t string) error {
	if t == "" {
		return nil
	}
	out := t
	if s.sent[m] == "" && s.anyText {
		out = stepSeparator + t
	}
	s.sent[m] += t
	s.anyText = true
	return s.delta(map[string]any{"content": out})
}

// sendCall sends the first chunk of a client call, numbered next.
func (s *chunkView) sendCall(id, name, args string) error {
	c := &streamedCall{index: s.next, args: args}
	s.next++
	s.calls[id] = c
	call := outToolCall{Index: &c.index, ID: id, Type: "function"}
	call.Function.Name, call.Function.Arguments = name, args
	return s.delta(map[string]any{"tool_calls": []outToolCall{call}})
}

// sendArgs sends more of a client call's arguments.
func (s *chunkView) sendArgs(c *streamedCall, more string) error {
	call := outToolCall{Index: &c.index}
	call.Function.Arguments = more
	c.args += more
	return s.delta(map[string]any{"tool_calls": []outToolCall{call}})
}

// delta sends a chunk with one choice whose delta is d.
func (s *chunkView) delta(d map[string]any) error {
	return s.chunk([]map[string]any{{"index": 0, "delta": d, "logprobs": nil, "finish_reason": nil}}, nil)
}

// chunk sends one chat.completion.chunk; with include_usage every chunk
// has a usage, null but in the last.
func (s *chunkView) chunk(choices []map[string]any, u *usage) error {
	c := map[string]any{"id": s.r.id, "object": "chat.completion.chunk", "created": s.r.created,
		"model": s.r.model, "system_fingerprint": nil, "choices": choices}
	if s.r.usage {
		c["usage"] = u
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return s.out.write("data: " + string(b) + "\n\n")
}

// end sends the chunk with the finish reason, the usage chunk when asked
// for, and [DONE].
func (s *chunkView) end(out outcome) error {
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
	return s.out.write("data: [DONE]\n\n")
}

// fail ends the stream with an error event, as OpenAI's streams do.
func (s *chunkView) fail(e *apiError, _ chat.Usage) {
	b, _ := json.Marshal(map[string]*apiError{"error": e})
	_ = s.out.write("data: " + string(b) + "\n\n")
}
