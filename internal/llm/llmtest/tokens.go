package llmtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
)

// The fakes count tokens the way a rough tokenizer would: a token per four
// characters (runes), rounded up. A request's prompt counts the system
// prompt, the text of its messages, its tool calls' arguments, its tool
// results' text, and its tools' names, descriptions and input schemas; an
// answer counts its reasoning, text and tool calls' arguments. JSON
// (arguments, schemas) is counted in one canonical form, compact with keys
// sorted, so that it counts the same whichever way a client wrote it.
// Reasoning sent back in a request, ids and tool names of calls are not
// counted.

// PromptTokens is the fakes' estimate of the prompt tokens of req: what a
// fake reports as its input tokens (unless the turn scripts them) and
// compares with the context window (SetContextWindow). The fakes count what
// they receive, so the two agree when the providers send req's content as
// it is; they do not quite where a provider rewrites it: OpenAI's joins a
// message's text parts with newlines, prefixes an error result with
// "error: " and sends an empty result as "null", and a tool with an empty
// schema gets the provider's default one.
func PromptTokens(req llm.Request) int64 {
	var c counter
	c.text(req.System)
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			switch {
			case p.Type == chat.PartText && (m.Role == chat.RoleUser || m.Role == chat.RoleAssistant):
				c.text(p.Text)
			case p.Type == chat.PartToolCall && m.Role == chat.RoleAssistant:
				c.json(callArgs(p.Args))
			case p.Type == chat.PartToolResult:
				c.text(resultText(p.Output))
			}
		}
	}
	for _, t := range req.Tools {
		schema := string(bytes.TrimSpace(t.InputSchema))
		if schema == "" || schema == "null" {
			schema = `{"type":"object"}`
		}
		c.tool(t.Name, t.Description, schema)
	}
	return c.tokens()
}

// OutputTokens is the fakes' estimate of the output tokens of t's answer:
// what a fake reports (unless t.Usage scripts them), from the characters
// of its reasoning, text and tool calls' arguments.
func OutputTokens(t Turn) int64 {
	var c counter
	c.text(t.Reasoning)
	c.text(t.Text)
	for _, call := range t.ToolCalls {
		c.text(call.Args)
	}
	return c.tokens()
}

// usage is the usage a turn answering a prompt of that many tokens reports:
// the scripted counts, and the estimates for those not scripted.
func (t Turn) usage(prompt int64) Usage {
	u := t.Usage
	if u.InputTokens == 0 {
		u.InputTokens = prompt
	}
	if u.OutputTokens == 0 {
		u.OutputTokens = OutputTokens(t)
	}
	return u
}

// counter adds up the characters of a prompt or an answer.
type counter struct{ runes int64 }

func (c *counter) text(s string) { c.runes += int64(utf8.RuneCountInString(s)) }

// json counts s in canonical form if it is JSON, as it is otherwise.
func (c *counter) json(s string) { c.text(canonicalJSON(s)) }

// tool counts a tool's declaration.
func (c *counter) tool(name, description, schema string) {
	c.text(name)
	c.text(description)
	c.json(schema)
}

// tokens is a token per four characters, rounded up.
func (c *counter) tokens() int64 { return (c.runes + 3) / 4 }

// canonicalJSON is s compact, with object keys sorted and numbers as Go
// writes a float64; s itself if it is not JSON.
func canonicalJSON(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return s
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// callArgs is a stored call's arguments as a provider sends them: {} for
// none, the text of a JSON string (arguments that were not JSON), the JSON
// otherwise.
func callArgs(args json.RawMessage) string {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		return "{}"
	}
	var s string
	if json.Unmarshal(args, &s) == nil {
		return s
	}
	return string(args)
}

// resultText is a tool result's text as the model reads it: a JSON
// string's text, other JSON as written, nothing for none.
func resultText(out json.RawMessage) string {
	out = bytes.TrimSpace(out)
	if len(out) == 0 || string(out) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	return string(out)
}

// contentText is the text of a message's content as the APIs take it: a
// string, or a list of parts whose "text" fields count (text, input_text,
// output_text parts; others, such as images, have none). With blocks, only
// parts of type "text" count, as Anthropic's list holds other blocks that
// the callers count themselves.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// chatPromptTokens counts a Chat Completions request: every message's
// content (the system prompt travels as one), its tool calls' arguments
// and the function tools.
func chatPromptTokens(req openaiRequest) int64 {
	var msgs []struct {
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			Function struct {
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	_ = json.Unmarshal(req.field("messages"), &msgs)
	var tools []struct {
		Function *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	_ = json.Unmarshal(req.field("tools"), &tools)

	var c counter
	for _, m := range msgs {
		c.text(contentText(m.Content))
		for _, call := range m.ToolCalls {
			c.json(call.Function.Arguments)
		}
	}
	for _, t := range tools {
		if f := t.Function; f != nil {
			c.tool(f.Name, f.Description, string(f.Parameters))
		}
	}
	return c.tokens()
}

// responsesPromptTokens counts a Responses request: the instructions, the
// input (a string, or its message, function_call and function_call_output
// items) and the function tools.
func responsesPromptTokens(req openaiRequest) int64 {
	var c counter
	var instructions string
	_ = json.Unmarshal(req.field("instructions"), &instructions)
	c.text(instructions)
	var input string
	if json.Unmarshal(req.field("input"), &input) == nil {
		c.text(input)
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Arguments string          `json:"arguments"`
		Output    json.RawMessage `json:"output"`
	}
	_ = json.Unmarshal(req.field("input"), &items)
	for _, it := range items {
		switch {
		case it.Type == "message" || (it.Type == "" && it.Role != ""):
			c.text(contentText(it.Content))
		case it.Type == "function_call":
			c.json(it.Arguments)
		case it.Type == "function_call_output":
			c.text(contentText(it.Output))
		}
	}
	var tools []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	_ = json.Unmarshal(req.field("tools"), &tools)
	for _, t := range tools {
		if t.Type == "function" {
			c.tool(t.Name, t.Description, string(t.Parameters))
		}
	}
	return c.tokens()
}

// anthropicPromptTokens counts a Messages request: the system prompt, the
// messages' text, tool_use inputs and tool_result contents, and the tools.
func anthropicPromptTokens(body []byte) int64 {
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(body, &req)
	var c counter
	c.text(contentText(req.System))
	for _, m := range req.Messages {
		c.text(contentText(m.Content))
		var blocks []struct {
			Type    string          `json:"type"`
			Input   json.RawMessage `json:"input"`
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				c.json(string(b.Input))
			case "tool_result":
				c.text(contentText(b.Content))
			}
		}
	}
	for _, t := range req.Tools {
		if len(t.InputSchema) > 0 { // a client tool; server tools have no schema
			c.tool(t.Name, t.Description, string(t.InputSchema))
		}
	}
	return c.tokens()
}
