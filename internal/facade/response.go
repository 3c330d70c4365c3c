package facade

import (
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
)

// Finish reasons a response may carry: never an intermediate one.
const (
	finishStop      = "stop"
	finishToolCalls = "tool_calls"
)

// responder makes the Chat Completions objects of one request's run.
type responder struct {
	id      string // chatcmpl-<chat id>-<id of the message the run answers>
	model   string // as the request named it
	created int64
	client  map[string]bool // the chat's dynamic tools: the calls the client sees
	usage   bool            // stream_options.include_usage
}

// newResponder names the run of chat c that answers the messages up to
// baseline.
func newResponder(req *completionRequest, c chat.Chat, baseline int64) *responder {
	r := &responder{
		id:      fmt.Sprintf("chatcmpl-%s-%d", c.ID, baseline),
		model:   req.Model,
		created: time.Now().Unix(),
		client:  map[string]bool{},
		usage:   req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
	}
	for _, t := range c.DynamicTools {
		r.client[t.Name] = true
	}
	return r
}

// outToolCall is a call in a response.
type outToolCall struct {
	Index    *int   `json:"index,omitempty"` // chunks only
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// usage is OpenAI's token count.
type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func usageOf(u chat.Usage) usage {
	return usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
}

// finishReason is tool_calls when the chat waits for client calls, else stop.
func finishReason(out outcome) string {
	if len(out.Calls) > 0 {
		return finishToolCalls
	}
	return finishStop
}

// completion is the chat.completion object of a run that ended.
func (r *responder) completion(out outcome) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if t := out.text(); t != "" || len(out.Calls) == 0 {
		msg["content"] = t
	}
	if len(out.Calls) > 0 {
		calls := make([]outToolCall, len(out.Calls))
		for i, c := range out.Calls {
			calls[i] = outToolCall{ID: c.ToolCallID, Type: "function"}
			calls[i].Function.Name = c.ToolName
			calls[i].Function.Arguments = argsString(c.Args)
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id":      r.id,
		"object":  "chat.completion",
		"created": r.created,
		"model":   r.model,
		"choices": []map[string]any{{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": finishReason(out),
		}},
		"usage":              usageOf(out.Usage),
		"system_fingerprint": nil,
	}
}

// argsString is a call's arguments as the JSON string OpenAI sends.
func argsString(args []byte) string {
	if len(args) == 0 {
		return "{}"
	}
	return string(args)
}
