package facade

import (
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/chat"
)

// respResponder makes the Responses objects of one request's run.
type respResponder struct {
	id           string // resp_<chat id>_<id of the last message before the run>
	model        string
	created      int64
	instructions any // the chat's system prompt, or nil
	previous     any // the request's previous_response_id, or nil
	client       map[string]bool
	tools        []map[string]any // the chat's dynamic tools, in the Responses shape
	format       map[string]any   // text.format: the answer's format
}

// responseID names the run of chat id that answers the messages up to
// baseline; parseResponseID reads it back.
func responseID(id string, baseline int64) string {
	return fmt.Sprintf("resp_%s_%d", id, baseline)
}

// parseResponseID reads the chat id of a response id (its baseline must be
// well formed, but the caller needs only the chat).
func parseResponseID(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, "resp_")
	i := strings.LastIndexByte(rest, '_')
	if !ok || i <= 0 {
		return "", false
	}
	var n int64
	if _, err := fmt.Sscanf(rest[i+1:], "%d", &n); err != nil || fmt.Sprint(n) != rest[i+1:] {
		return "", false
	}
	return rest[:i], true
}

// newRespResponder names the run of target tg of request req.
func newRespResponder(req *responsesRequest, tg target) *respResponder {
	c, baseline := tg.chat, tg.baseline
	r := &respResponder{id: responseID(c.ID, baseline), model: req.Model, created: time.Now().Unix(), client: map[string]bool{}}
	if c.SystemPrompt != "" {
		r.instructions = c.SystemPrompt
	}
	if req.PreviousResponseID != "" {
		r.previous = req.PreviousResponseID
	}
	r.format = map[string]any{"type": "text"}
	if f := tg.output; f != nil {
		r.format = map[string]any{"type": chat.FormatJSONSchema, "name": f.Name, "schema": f.Schema, "strict": f.Strict}
	}
	r.tools = []map[string]any{}
	for _, t := range c.DynamicTools {
		r.client[t.Name] = true
		r.tools = append(r.tools, map[string]any{"type": "function", "name": t.Name, "description": t.Description,
			"parameters": t.InputSchema, "strict": false})
	}
	return r
}

// object is the response object: status "in_progress" (output and usage
// still empty), "completed" or "failed".
func (r *respResponder) object(status string, output []map[string]any, u *chat.Usage, fail *apiError) map[string]any {
	if output == nil {
		output = []map[string]any{}
	}
	o := map[string]any{
		"id": r.id, "object": "response", "created_at": r.created, "status": status, "model": r.model,
		"output": output, "error": nil, "incomplete_details": nil, "instructions": r.instructions,
		"metadata": map[string]any{}, "parallel_tool_calls": true, "temperature": nil, "top_p": nil,
		"tool_choice": "auto", "tools": r.tools, "previous_response_id": r.previous, "store": true,
		"background": false, "truncation": "disabled", "max_output_tokens": nil,
		"text": map[string]any{"format": r.format}, "usage": nil,
	}
	if u != nil {
		o["usage"] = map[string]any{
			"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "total_tokens": u.InputTokens + u.OutputTokens,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		}
	}
	if fail != nil {
		code := "server_error"
		if fail.Status == 429 {
			code = "rate_limit_exceeded"
		}
		o["error"] = map[string]any{"code": code, "message": fail.Message}
	}
	return o
}

// emitter sends one stream event; nil builds without streaming.
type emitter func(event string, fields map[string]any) error

// outItem is an output item being built.
type outItem struct {
	index  int
	kind   string // "message" or "function_call"
	id     string
	text   string
	callID string
	name   string
	args   string
	done   bool
}

// outputBuilder turns a run's steps into output items, in the order the
// client sees them: the text of every step in one message item (a blank
// line between steps) until a client function call, which is an item of
// its own; text after it starts another message item. Server-side calls
// are never shown. With an emitter it streams each change as it is made.
type outputBuilder struct {
	r       *respResponder
	emit    emitter
	items   []*outItem
	open    *outItem            // the message item text goes to
	text    map[int64]string    // message id -> its text so far
	calls   map[string]*outItem // by call id
	anyText bool
}

func newOutputBuilder(r *respResponder, emit emitter) *outputBuilder {
	if emit == nil {
		emit = func(string, map[string]any) error { return nil }
	}
	return &outputBuilder{r: r, emit: emit, text: map[int64]string{}, calls: map[string]*outItem{}}
}

// addText adds text of message m.
func (b *outputBuilder) addText(m int64, t string) error {
	if t == "" {
		return nil
	}
	delta := t
	if b.text[m] == "" && b.anyText && b.open != nil {
		delta = stepSeparator + t // a later step's text, in the same item
	}
	b.text[m] += t
	b.anyText = true
	if b.open == nil {
		it := &outItem{index: len(b.items), kind: "message", id: fmt.Sprintf("msg_%s_%d", strings.TrimPrefix(b.r.id, "resp_"), len(b.items))}
		b.items, b.open = append(b.items, it), it
		if err := b.emit("response.output_item.added", map[string]any{"output_index": it.index, "item": it.json("in_progress")}); err != nil {
			return err
		}
		if err := b.emit("response.content_part.added", b.partFields(it, "")); err != nil {
			return err
		}
	}
	b.open.text += delta
	return b.emit("response.output_text.delta", map[string]any{"item_id": b.open.id, "output_index": b.open.index,
		"content_index": 0, "delta": delta, "logprobs": []any{}})
}

func (b *outputBuilder) partFields(it *outItem, text string) map[string]any {
	return map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}}
}

// closeText ends the open message item.
func (b *outputBuilder) closeText() error {
	it := b.open
	if it == nil {
		return nil
	}
	b.open, it.done = nil, true
	if err := b.emit("response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.index,
		"content_index": 0, "text": it.text, "logprobs": []any{}}); err != nil {
		return err
	}
	if err := b.emit("response.content_part.done", b.partFields(it, it.text)); err != nil {
		return err
	}
	return b.emit("response.output_item.done", map[string]any{"output_index": it.index, "item": it.json("completed")})
}

// startCall adds a client call's item; args may be empty, more coming.
func (b *outputBuilder) startCall(id, name, args string) error {
	if err := b.closeText(); err != nil {
		return err
	}
	it := &outItem{index: len(b.items), kind: "function_call", id: "fc_" + id, callID: id, name: name}
	b.items = append(b.items, it)
	b.calls[id] = it
	if err := b.emit("response.output_item.added", map[string]any{"output_index": it.index, "item": it.json("in_progress")}); err != nil {
		return err
	}
	return b.moreArgs(it, args)
}

func (b *outputBuilder) moreArgs(it *outItem, more string) error {
	if more == "" || it.done {
		return nil
	}
	it.args += more
	return b.emit("response.function_call_arguments.delta", map[string]any{"item_id": it.id, "output_index": it.index, "delta": more})
}

// finishCall ends a call's item with its full arguments.
func (b *outputBuilder) finishCall(it *outItem, args string) error {
	if it.done {
		return nil
	}
	if strings.HasPrefix(args, it.args) {
		if err := b.moreArgs(it, args[len(it.args):]); err != nil {
			return err
		}
	}
	it.args, it.done = args, true
	if err := b.emit("response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": it.index,
		"name": it.name, "arguments": it.args}); err != nil {
		return err
	}
	return b.emit("response.output_item.done", map[string]any{"output_index": it.index, "item": it.json("completed")})
}

// message adds a step's durable message: what of it was not streamed, and
// the end of its client calls.
func (b *outputBuilder) message(m chat.Message) error {
	if full, sent := textOf(m), b.text[m.ID]; strings.HasPrefix(full, sent) {
		if err := b.addText(m.ID, full[len(sent):]); err != nil {
			return err
		}
	}
	for _, p := range m.Parts {
		if p.Type != chat.PartToolCall || !b.r.client[p.ToolName] {
			continue
		}
		args := argsString(p.Args)
		if b.calls[p.ToolCallID] == nil {
			if err := b.startCall(p.ToolCallID, p.ToolName, ""); err != nil {
				return err
			}
		}
		if err := b.finishCall(b.calls[p.ToolCallID], args); err != nil {
			return err
		}
	}
	return nil
}

// end closes every item and returns the output.
func (b *outputBuilder) end() ([]map[string]any, error) {
	if err := b.closeText(); err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(b.items))
	for i, it := range b.items {
		if it.kind == "function_call" {
			if err := b.finishCall(it, it.args); err != nil {
				return nil, err
			}
		}
		out[i] = it.json("completed")
	}
	return out, nil
}

// json is the item in the Responses shape.
func (it *outItem) json(status string) map[string]any {
	if it.kind == "function_call" {
		args := it.args
		if status != "completed" {
			args = ""
		}
		return map[string]any{"type": "function_call", "id": it.id, "call_id": it.callID, "name": it.name, "arguments": args, "status": status}
	}
	content := []any{}
	if status == "completed" {
		content = append(content, map[string]any{"type": "output_text", "text": it.text, "annotations": []any{}, "logprobs": []any{}})
	}
	return map[string]any{"type": "message", "id": it.id, "role": "assistant", "status": status, "content": content}
}

// output builds a finished run's output without streaming.
func (r *respResponder) output(out outcome) []map[string]any {
	b := newOutputBuilder(r, nil)
	for _, m := range out.Steps {
		_ = b.message(m)
	}
	items, _ := b.end()
	return items
}
