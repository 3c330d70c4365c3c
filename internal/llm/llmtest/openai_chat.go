package llmtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"testing"
)

// OpenAIChat is a fake OpenAI Chat Completions API: POST /v1/chat/completions
// (or /chat/completions) answers each request with the next scripted Turn,
// streamed as data-only server-sent events of chat.completion.chunk objects.
//
// A turn streams a first chunk with the assistant role; Reasoning as
// delta.reasoning_content chunks (OpenAI does not stream reasoning here, but
// OpenAI-compatible servers such as vLLM and DeepSeek do, in this shape);
// Text as delta.content chunks; each ToolCall as a delta.tool_calls chunk
// with its index, id, type and name and empty arguments, then chunks of its
// arguments (one call after another, or round robin with Interleave); a
// chunk with the finish_reason ("tool_calls" or "stop"); when the request
// asked for stream_options.include_usage, a last chunk with empty choices
// and the usage; and data: [DONE].
//
// A turn with an error Status answers with that status, the real error body
// ({"error":{"message","type","param","code"}}) and, with RetryAfter, a
// retry-after header. With CutAfter as well, the error comes mid-stream
// instead, as the API sends it: after CutAfter events of a 200 stream, a
// data: {"error":{...}} event, and the stream ends. CutAfter alone drops the
// connection after that many events, with no terminating chunk.
// FirstChunkDelay holds back the first event (after the 200 headers; before
// an error answer), ending early if the client goes away. Gate holds the
// turn back until the test closes it, and Started and Gone tell the test
// when the turn began and when its client left (see Turn).
//
// Malformed images and files are refused as the API refuses them (see
// content.go); a malformed structured output
// format, as the API refuses it (see format.go). Messages whose tool calls and results do not pair up are refused as the
// API refuses them, with HTTP 400 and the param at fault: an assistant
// message with tool_calls not followed by a tool message for each call
// ("An assistant message with 'tool_calls' must be followed by tool
// messages responding to each 'tool_call_id'. ..."), a tool message with no
// assistant message with tool_calls before its run of tool messages
// ("Invalid parameter: messages with role 'tool' must be a response to a
// preceeding message with 'tool_calls'.", the API's spelling), or one
// answering a call that message did not make (see Script).
//
// Usage reports the scripted counts, or else the estimates (PromptTokens,
// OutputTokens). With a context window (SetContextWindow), a request over it
// is refused with HTTP 400 and code context_length_exceeded: "This model's
// maximum context length is W tokens. However, your messages resulted in P
// tokens. Please reduce the length of the messages."
//
// Its *Script (Push, Requests) and URL, the base URL to give the SDK
// (option.WithBaseURL), come from the embedded openaiFake.
type OpenAIChat struct {
	openaiFake
}

// NewOpenAIChat starts a fake Chat Completions server, closed when t ends.
func NewOpenAIChat(t testing.TB) *OpenAIChat {
	f := &OpenAIChat{openaiFake{
		path: "/chat/completions", events: openaiChatEvents, streamError: openaiChatError, history: func(req openaiRequest) *historyError {
			return cmp.Or(chatFormatError(req), chatContentError(req), chatHistoryError(req))
		},
		promptTokens: chatPromptTokens, tooLong: chatTooLong,
	}}
	f.start(t)
	return f
}

// openaiChatChoice is a chunk's only choice: delta, logprobs, finish_reason.
func openaiChatChoice(delta openaiObj, finish any) openaiObj {
	return openaiObj{{"index", 0}, {"delta", delta}, {"logprobs", nil}, {"finish_reason", finish}}
}

// openaiChatEvents is the whole stream of a successful turn.
func openaiChatEvents(t Turn, req openaiRequest, n int64) []openaiEvent {
	var opts struct {
		IncludeUsage       bool  `json:"include_usage"`
		IncludeObfuscation *bool `json:"include_obfuscation"`
	}
	_ = json.Unmarshal(req.StreamOptions, &opts)
	obfuscate := opts.IncludeObfuscation == nil || *opts.IncludeObfuscation
	id := fmt.Sprintf("chatcmpl-fake%06d", n)
	created := int64(1767225600) + n

	var evs []openaiEvent
	chunk := func(choices []openaiObj, usage any) {
		c := openaiObj{
			{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", req.Model},
			{"service_tier", "default"}, {"system_fingerprint", "fp_fake"}, {"choices", choices},
		}
		if opts.IncludeUsage {
			c = append(c, openaiField{"usage", usage})
		}
		if obfuscate {
			c = append(c, openaiField{"obfuscation", "x7Qp"})
		}
		evs = append(evs, openaiEvent{data: openaiJSON(c)})
	}
	delta := func(d openaiObj) { chunk([]openaiObj{openaiChatChoice(d, nil)}, nil) }

	delta(openaiObj{{"role", "assistant"}, {"content", ""}, {"refusal", nil}})
	for _, c := range Chunks(t.Reasoning, t.ChunkSize) {
		delta(openaiObj{{"content", nil}, {"reasoning_content", c}})
	}
	for _, c := range Chunks(t.Text, t.ChunkSize) {
		delta(openaiObj{{"content", c}})
	}
	startCall := func(i int) {
		c := t.ToolCalls[i]
		delta(openaiObj{{"tool_calls", []openaiObj{{
			{"index", i}, {"id", openaiCallID(c, i)}, {"type", "function"},
			{"function", openaiObj{{"name", c.Name}, {"arguments", ""}}},
		}}}})
	}
	argDelta := func(s openaiArgStep) {
		delta(openaiObj{{"tool_calls", []openaiObj{{
			{"index", s.call}, {"function", openaiObj{{"arguments", s.piece}}},
		}}}})
	}
	steps := openaiArgSteps(t)
	if t.Interleave {
		for i := range t.ToolCalls {
			startCall(i)
		}
		for _, s := range steps {
			argDelta(s)
		}
	} else {
		for i := range t.ToolCalls {
			startCall(i)
			for _, s := range steps {
				if s.call == i {
					argDelta(s)
				}
			}
		}
	}
	finish := "stop"
	if len(t.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	chunk([]openaiObj{openaiChatChoice(openaiObj{}, finish)}, nil)
	if opts.IncludeUsage {
		chunk([]openaiObj{}, openaiObj{
			{"prompt_tokens", t.Usage.InputTokens},
			{"completion_tokens", t.Usage.OutputTokens},
			{"total_tokens", t.Usage.InputTokens + t.Usage.OutputTokens},
			{"prompt_tokens_details", openaiObj{{"cached_tokens", 0}, {"audio_tokens", 0}}},
			{"completion_tokens_details", openaiObj{
				{"reasoning_tokens", 0}, {"audio_tokens", 0},
				{"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0},
			}},
		})
	}
	return append(evs, openaiEvent{data: "[DONE]"})
}

// chatTooLong is the API's error object for messages too long for the
// model's context window.
func chatTooLong(prompt int64, window int) openaiObj {
	msg := fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. "+
		"Please reduce the length of the messages.", window, prompt)
	return openaiObj{{"message", msg}, {"type", "invalid_request_error"}, {"param", "messages"}, {"code", "context_length_exceeded"}}
}

// openaiChatError is the mid-stream error event of Chat Completions.
func openaiChatError(t Turn, _ int) openaiEvent {
	return openaiEvent{data: openaiJSON(openaiObj{{"error", openaiErrorObject(t.Status, t.ErrorMessage, nil)}})}
}
