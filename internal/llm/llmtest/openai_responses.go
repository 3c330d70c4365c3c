package llmtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"testing"
)

// OpenAIResponses is a fake OpenAI Responses API: POST /v1/responses (or
// /responses) answers each request with the next scripted Turn, streamed as
// named server-sent events, each carrying its sequence_number.
//
// A turn streams response.created and response.in_progress; Reasoning as a
// reasoning item whose summary arrives as response.reasoning_summary_text
// deltas when the request asked for reasoning.summary (as OpenAI does; the
// item is sent with an empty summary otherwise); Text as a message item with
// response.output_text deltas; each ToolCall as a function_call item whose
// arguments arrive as response.function_call_arguments deltas (one call
// after another, or, with Interleave, every item added first and the deltas
// round robin); each item is opened with response.output_item.added and
// closed with its .done events and response.output_item.done; and
// response.completed, with the whole response and its usage. The Responses
// API sends no data: [DONE].
//
// A turn with an error Status answers with that status, the real error body
// ({"error":{"message","type","param","code"}}) and, with RetryAfter, a
// retry-after header. With CutAfter as well, the error comes mid-stream
// instead, as the API sends it: after CutAfter events of a 200 stream, an
// "event: error" whose data nests the error object, and the stream ends.
// CutAfter alone drops the connection after that many events, with no
// terminating chunk. FirstChunkDelay holds back the first event (after the
// 200 headers; before an error answer), ending early if the client goes away.
// Gate holds the turn back until the test closes it, and Started and Gone
// tell the test when the turn began and when its client left (see Turn).
//
// Input whose tool calls and outputs do not pair up is refused as the API
// refuses it, with HTTP 400 and param "input": "No tool call found for
// function call output with call_id X." for an output that answers no
// earlier function_call, "No tool output found for function call X." for a
// function_call no later output answers (see Script).
//
// Usage reports the scripted counts, or else the estimates (PromptTokens,
// OutputTokens). With a context window (SetContextWindow), a request over it
// is refused with HTTP 400, param "input" and code context_length_exceeded:
// "Your input exceeds the context window of this model. Please adjust your
// input and try again."
//
// Its *Script (Push, Requests) and URL, the base URL to give the SDK
// (option.WithBaseURL), come from the embedded openaiFake.
type OpenAIResponses struct {
	openaiFake
}

// NewOpenAIResponses starts a fake Responses server, closed when t ends.
func NewOpenAIResponses(t testing.TB) *OpenAIResponses {
	f := &OpenAIResponses{openaiFake{
		path: "/responses", events: openaiResponsesEvents, streamError: openaiResponsesError, history: func(req openaiRequest) *historyError {
			return cmp.Or(responsesFormatError(req), responsesContentError(req), responsesHistoryError(req))
		},
		promptTokens: responsesPromptTokens, tooLong: responsesTooLong,
	}}
	f.start(t)
	return f
}

// openaiResponse is the response object as the stream's lifecycle events
// carry it, echoing the request's settings.
func openaiResponse(req openaiRequest, id string, n int64, status string, output []openaiObj, usage any) openaiObj {
	reasoning := req.field("reasoning")
	if string(reasoning) == "null" {
		reasoning = json.RawMessage(`{"effort":null,"summary":null}`)
	}
	tools := req.field("tools")
	if string(tools) == "null" {
		tools = json.RawMessage(`[]`)
	}
	store := req.field("store")
	if string(store) == "null" {
		store = json.RawMessage(`true`)
	}
	if output == nil {
		output = []openaiObj{}
	}
	return openaiObj{
		{"id", id}, {"object", "response"}, {"created_at", int64(1767225600) + n}, {"status", status},
		{"background", false}, {"error", nil}, {"incomplete_details", nil},
		{"instructions", req.field("instructions")}, {"max_output_tokens", req.field("max_output_tokens")},
		{"max_tool_calls", nil}, {"model", req.Model}, {"output", output}, {"parallel_tool_calls", true},
		{"previous_response_id", nil}, {"prompt_cache_key", nil}, {"reasoning", reasoning},
		{"safety_identifier", nil}, {"service_tier", "default"}, {"store", store}, {"temperature", 1.0},
		{"text", openaiObj{{"format", openaiObj{{"type", "text"}}}, {"verbosity", "medium"}}},
		{"tool_choice", "auto"}, {"tools", tools}, {"top_logprobs", 0}, {"top_p", 1.0},
		{"truncation", "disabled"}, {"usage", usage}, {"user", nil}, {"metadata", openaiObj{}},
	}
}

// openaiResponsesEvents is the whole stream of a successful turn.
func openaiResponsesEvents(t Turn, req openaiRequest, n int64) []openaiEvent {
	id := fmt.Sprintf("resp_fake%06d", n)
	var evs []openaiEvent
	add := func(name string, fields ...openaiField) {
		ev := append(openaiObj{{"type", name}, {"sequence_number", len(evs)}}, fields...)
		evs = append(evs, openaiEvent{name: name, data: openaiJSON(ev)})
	}
	var output []openaiObj
	itemDone := func(item openaiObj) {
		add("response.output_item.done", openaiField{"output_index", len(output)}, openaiField{"item", item})
		output = append(output, item)
	}

	add("response.created", openaiField{"response", openaiResponse(req, id, n, "in_progress", nil, nil)})
	add("response.in_progress", openaiField{"response", openaiResponse(req, id, n, "in_progress", nil, nil)})

	if t.Reasoning != "" {
		var wantSummary struct {
			Summary string `json:"summary"`
		}
		_ = json.Unmarshal(req.field("reasoning"), &wantSummary)
		itemID := fmt.Sprintf("rs_fake%06d", n)
		at := openaiObj{{"item_id", itemID}, {"output_index", len(output)}}
		add("response.output_item.added", openaiField{"output_index", len(output)},
			openaiField{"item", openaiObj{{"id", itemID}, {"type", "reasoning"}, {"summary", []openaiObj{}}}})
		summary := []openaiObj{}
		if wantSummary.Summary != "" {
			part := func(text string) openaiObj { return openaiObj{{"type", "summary_text"}, {"text", text}} }
			add("response.reasoning_summary_part.added", append(at, openaiField{"summary_index", 0}, openaiField{"part", part("")})...)
			for _, c := range Chunks(t.Reasoning, t.ChunkSize) {
				add("response.reasoning_summary_text.delta", append(at, openaiField{"summary_index", 0}, openaiField{"delta", c}, openaiField{"obfuscation", "q1"})...)
			}
			add("response.reasoning_summary_text.done", append(at, openaiField{"summary_index", 0}, openaiField{"text", t.Reasoning})...)
			add("response.reasoning_summary_part.done", append(at, openaiField{"summary_index", 0}, openaiField{"part", part(t.Reasoning)})...)
			summary = []openaiObj{part(t.Reasoning)}
		}
		itemDone(openaiObj{{"id", itemID}, {"type", "reasoning"}, {"summary", summary}})
	}

	if t.Text != "" {
		itemID := fmt.Sprintf("msg_fake%06d", n)
		at := openaiObj{{"item_id", itemID}, {"output_index", len(output)}, {"content_index", 0}}
		part := func(text string) openaiObj {
			return openaiObj{{"type", "output_text"}, {"annotations", []any{}}, {"logprobs", []any{}}, {"text", text}}
		}
		message := func(status string, content []openaiObj) openaiObj {
			return openaiObj{{"id", itemID}, {"type", "message"}, {"status", status}, {"content", content}, {"role", "assistant"}}
		}
		add("response.output_item.added", openaiField{"output_index", len(output)}, openaiField{"item", message("in_progress", []openaiObj{})})
		add("response.content_part.added", append(at, openaiField{"part", part("")})...)
		for _, c := range Chunks(t.Text, t.ChunkSize) {
			add("response.output_text.delta", append(at, openaiField{"delta", c}, openaiField{"logprobs", []any{}}, openaiField{"obfuscation", "q1"})...)
		}
		add("response.output_text.done", append(at, openaiField{"text", t.Text}, openaiField{"logprobs", []any{}})...)
		add("response.content_part.done", append(at, openaiField{"part", part(t.Text)})...)
		itemDone(message("completed", []openaiObj{part(t.Text)}))
	}

	first := len(output)
	call := func(i int, status, args string) openaiObj {
		c := t.ToolCalls[i]
		return openaiObj{
			{"id", fmt.Sprintf("fc_fake%06d_%d", n, i)}, {"type", "function_call"}, {"status", status},
			{"arguments", args}, {"call_id", openaiCallID(c, i)}, {"name", c.Name},
		}
	}
	at := func(i int) openaiObj {
		return openaiObj{{"item_id", fmt.Sprintf("fc_fake%06d_%d", n, i)}, {"output_index", first + i}}
	}
	started := func(i int) {
		add("response.output_item.added", openaiField{"output_index", first + i}, openaiField{"item", call(i, "in_progress", "")})
	}
	argDelta := func(s openaiArgStep) {
		add("response.function_call_arguments.delta", append(at(s.call), openaiField{"delta", s.piece}, openaiField{"obfuscation", "q1"})...)
	}
	finished := func(i int) {
		add("response.function_call_arguments.done", append(at(i), openaiField{"arguments", t.ToolCalls[i].Args})...)
		itemDone(call(i, "completed", t.ToolCalls[i].Args))
	}
	steps := openaiArgSteps(t)
	if t.Interleave {
		for i := range t.ToolCalls {
			started(i)
		}
		for _, s := range steps {
			argDelta(s)
		}
		for i := range t.ToolCalls {
			finished(i)
		}
	} else {
		for i := range t.ToolCalls {
			started(i)
			for _, s := range steps {
				if s.call == i {
					argDelta(s)
				}
			}
			finished(i)
		}
	}

	usage := openaiObj{
		{"input_tokens", t.Usage.InputTokens}, {"input_tokens_details", openaiObj{{"cached_tokens", 0}}},
		{"output_tokens", t.Usage.OutputTokens}, {"output_tokens_details", openaiObj{{"reasoning_tokens", 0}}},
		{"total_tokens", t.Usage.InputTokens + t.Usage.OutputTokens},
	}
	add("response.completed", openaiField{"response", openaiResponse(req, id, n, "completed", output, usage)})
	return evs
}

// responsesTooLong is the API's error object for input too long for the
// model's context window; unlike Chat Completions, it gives no numbers.
func responsesTooLong(int64, int) openaiObj {
	return openaiObj{
		{"message", "Your input exceeds the context window of this model. Please adjust your input and try again."},
		{"type", "invalid_request_error"}, {"param", "input"}, {"code", "context_length_exceeded"},
	}
}

// openaiResponsesError is the mid-stream error event of the Responses API,
// in the shape the API sends (the error object nested, not flattened as its
// reference once showed).
func openaiResponsesError(t Turn, seq int) openaiEvent {
	e := openaiErrorObject(t.Status, t.ErrorMessage, nil)
	return openaiEvent{name: "error", data: openaiJSON(openaiObj{
		{"type", "error"}, {"sequence_number", seq}, {"error", e},
	})}
}
