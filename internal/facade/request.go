package facade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/jsonscan"
)

// completionRequest is what parley reads of a Chat Completions request;
// fields it does not know are ignored (docs/openai-compat.md lists them).
type completionRequest struct {
	Model               string          `json:"model"`
	Messages            []inMessage     `json:"messages"`
	Tools               []inTool        `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User           string          `json:"user"`
	ResponseFormat json.RawMessage `json:"response_format"`

	// use is what Model names (readRequest), format its response_format
	// (check): nil when it has none.
	use    runModel
	format *chat.ResponseFormat

	// apiLabel is the value of the chat's "api" label; "" is openai-chat.
	// The Responses API maps its requests onto this one and sets it.
	apiLabel string
}

// inMessage is one message of a request.
type inMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []inToolCall    `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// inToolCall is a call of an assistant message of a request.
type inToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// inTool is a tool a request declares.
type inTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// conversation is a request's messages as parley holds them.
type conversation struct {
	System  string         // system and developer messages, joined
	History []chat.Message // user, assistant and tool messages, oldest first
	// Results are the tool results of the trailing tool messages (after the
	// last assistant message), in call order; nil when the request ends
	// otherwise. They may continue a chat that waits for exactly them.
	Results []chat.Part
	// Calls are the tool calls of the last assistant message and Prior the
	// messages before it, when Results is not nil: what a chat the request
	// continues must have shown its client (see waitingFor).
	Calls []chat.Part
	Prior []chat.Message
}

// toolChoiceNone reports tool_choice "none": the model is offered no tool.
func (r *completionRequest) toolChoiceNone() bool {
	return bytes.Equal(bytes.TrimSpace(r.ToolChoice), []byte(`"none"`))
}

// check refuses what parley cannot serve, before anything is written.
func (r *completionRequest) check() error {
	if r.Model == "" {
		return invalid("model", "you must provide a model parameter")
	}
	if r.N != nil && *r.N != 1 {
		return invalid("n", "parley answers with one choice: n must be 1")
	}
	if r.format == nil {
		f, err := completionFormat(r.ResponseFormat)
		if err != nil {
			return err
		}
		r.format = f
	}
	if len(r.ToolChoice) > 0 {
		var s string
		var named struct {
			Type string `json:"type"`
		}
		switch {
		case json.Unmarshal(r.ToolChoice, &s) == nil:
			if s != "auto" && s != "none" && s != "required" {
				return invalid("tool_choice", "%q must be auto, none, required or a named function", s)
			}
		case json.Unmarshal(r.ToolChoice, &named) == nil && (named.Type == "function" || named.Type == "allowed_tools"):
		case string(bytes.TrimSpace(r.ToolChoice)) == "null":
		default:
			return invalid("tool_choice", "must be auto, none, required or a named function")
		}
	}
	return nil
}

// dynamicTools maps the request's function tools to the chat's dynamic
// tools; a tool of another type is refused.
func (r *completionRequest) dynamicTools() ([]chat.DynamicTool, error) {
	out := make([]chat.DynamicTool, 0, len(r.Tools))
	for i, t := range r.Tools {
		if t.Type != "function" {
			return nil, invalid(fmt.Sprintf("tools[%d].type", i), "%q is not supported: parley takes function tools only", t.Type)
		}
		schema := t.Function.Parameters
		if len(bytes.TrimSpace(schema)) == 0 || string(bytes.TrimSpace(schema)) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, chat.DynamicTool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	return out, nil
}

// conversation maps the request's messages. It checks what is the
// request's own business (roles, shapes, that tool messages follow an
// assistant message's calls, that no user message's text is over
// maxMessageBytes, that each image and file passes rules, naming the
// message or its part); the service checks the rest of the history.
func (r *completionRequest) conversation(maxMessageBytes int, rules fileRules) (conversation, error) {
	var cv conversation
	if len(r.Messages) == 0 {
		return cv, invalid("messages", "must hold at least one message")
	}
	var system []string
	var calls []chat.Part // of the last assistant message
	var lastAssistant = -1
	for i, m := range r.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			text, err := contentText(m.Content, param+".content", false)
			if err != nil {
				return cv, err
			}
			system = append(system, text)
		case "user":
			parts, size, err := userContent(m.Content, param+".content", rules)
			if err != nil {
				return cv, err
			}
			if size > maxMessageBytes {
				return cv, invalid(param+".content", "is %d bytes, at most %d allowed (limits.max_message_bytes)", size, maxMessageBytes)
			}
			cv.History = append(cv.History, chat.Message{Role: chat.RoleUser, Parts: parts})
		case "assistant":
			text, err := contentText(m.Content, param+".content", true)
			if err != nil {
				return cv, err
			}
			msg := chat.Message{Role: chat.RoleAssistant}
			if strings.TrimSpace(text) != "" {
				msg.Parts = append(msg.Parts, chat.TextPart(text))
			}
			calls = nil
			for j, c := range m.ToolCalls {
				cp := fmt.Sprintf("%s.tool_calls[%d]", param, j)
				args := c.Function.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				if c.ID == "" || c.Function.Name == "" || !json.Valid([]byte(args)) {
					return cv, invalid(cp, "a tool call needs an id, a function name and arguments that are JSON")
				}
				if err := checkArgs(args, cp+".function.arguments"); err != nil {
					return cv, err
				}
				p := chat.Part{Type: chat.PartToolCall, ToolCallID: c.ID, ToolName: c.Function.Name, Args: json.RawMessage(args)}
				msg.Parts = append(msg.Parts, p)
				calls = append(calls, p)
			}
			if len(msg.Parts) == 0 {
				return cv, invalid(param+".content", "an assistant message needs content or tool_calls")
			}
			cv.History = append(cv.History, msg)
			lastAssistant = len(cv.History) - 1
		case "tool":
			if err := addResult(&cv, m, param, calls, lastAssistant); err != nil {
				return cv, err
			}
		default:
			return cv, invalid(param+".role", "%q is not one of system, developer, user, assistant, tool", m.Role)
		}
	}
	cv.System = strings.Join(system, "\n\n")
	if len(cv.History) == 0 {
		return cv, invalid("messages", "must hold a user message: system messages alone leave nothing to answer")
	}
	if last := cv.History[len(cv.History)-1]; last.Role == chat.RoleAssistant {
		return cv, invalid("messages", "the last message is the assistant's: end with a user message or the results of its tool calls")
	}
	if last := cv.History[len(cv.History)-1]; last.Role == chat.RoleTool {
		cv.Results, cv.Calls, cv.Prior = last.Parts, calls, cv.History[:lastAssistant]
	}
	return cv, nil
}

// addResult adds a tool message to the tool message that follows the last
// assistant message, keeping its results in call order.
func addResult(cv *conversation, m inMessage, param string, calls []chat.Part, lastAssistant int) error {
	if lastAssistant < 0 || len(calls) == 0 || (len(cv.History)-1 != lastAssistant && cv.History[len(cv.History)-1].Role != chat.RoleTool) {
		return invalid(param+".role", "messages with role 'tool' must be a response to a preceding message with 'tool_calls'")
	}
	text, err := contentText(m.Content, param+".content", true)
	if err != nil {
		return err
	}
	pos := -1
	for i, c := range calls {
		if c.ToolCallID == m.ToolCallID {
			pos = i
		}
	}
	if pos < 0 {
		return invalid(param+".tool_call_id", "%q answers no call of the assistant message before it", m.ToolCallID)
	}
	out, _ := json.Marshal(text)
	part := chat.Part{Type: chat.PartToolResult, ToolCallID: m.ToolCallID, ToolName: calls[pos].ToolName, Output: out}
	if len(cv.History)-1 == lastAssistant {
		cv.History = append(cv.History, chat.Message{Role: chat.RoleTool})
	}
	tm := &cv.History[len(cv.History)-1]
	for _, p := range tm.Parts {
		if p.ToolCallID == m.ToolCallID {
			return invalid(param+".tool_call_id", "%q is answered twice", m.ToolCallID)
		}
	}
	// Insert in call order: the history keeps each message's results so.
	at := len(tm.Parts)
	for i, p := range tm.Parts {
		if callIndex(calls, p.ToolCallID) > pos {
			at = i
			break
		}
	}
	tm.Parts = append(tm.Parts[:at], append([]chat.Part{part}, tm.Parts[at:]...)...)
	return nil
}

// checkArgs holds a call's arguments, JSON inside a string of the request,
// to what the request's own JSON is held to (see readRequest): the body's
// scan sees them as one string, and would miss their depth and their NULs.
func checkArgs(args, param string) error {
	tooDeep, nul := jsonscan.Scan([]byte(args))
	switch {
	case tooDeep != nil:
		return invalid(param, "%s: %s", param, tooDeep.Error())
	case nul != nil:
		return invalid(param, "%s", (&jsonscan.NULError{Field: joinField(param, nul.Field), InKey: nul.InKey}).Error())
	}
	return nil
}

// joinField names field inner of the JSON held by field outer.
func joinField(outer, inner string) string {
	switch {
	case inner == "":
		return outer
	case strings.HasPrefix(inner, "["):
		return outer + inner
	}
	return outer + "." + inner
}

// callIndex is the position of a call among calls, -1 if absent.
func callIndex(calls []chat.Part, id string) int {
	for i, c := range calls {
		if c.ToolCallID == id {
			return i
		}
	}
	return -1
}

// partsText joins the text of an array of content parts, whose text parts
// have one of the types textTypes (and refusal parts their refusal); any
// other part is refused.
func partsText(raw json.RawMessage, param string, textTypes ...string) (string, error) {
	var parts []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(param, "must be a string or an array of content parts")
	}
	var b strings.Builder
	for i, p := range parts {
		switch {
		case slices.Contains(textTypes, p.Type):
			b.WriteString(p.Text)
		case p.Type == "refusal":
			b.WriteString(p.Refusal)
		default:
			return "", invalid(fmt.Sprintf("%s[%d].type", param, i), "%q is not supported: parley takes text parts only", p.Type)
		}
	}
	return b.String(), nil
}

// contentText reads a message's content: a string, or an array of parts of
// which text (and an assistant's refusal) parts are read and joined. null
// or "" is refused unless mayBeEmpty.
func contentText(raw json.RawMessage, param string, mayBeEmpty bool) (string, error) {
	raw = bytes.TrimSpace(raw)
	var text string
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", invalid(param, "is not a valid JSON string")
		}
	case raw[0] == '[':
		var err error
		if text, err = partsText(raw, param, "text"); err != nil {
			return "", err
		}
	default:
		return "", invalid(param, "must be a string or an array of content parts")
	}
	if !mayBeEmpty && strings.TrimSpace(text) == "" {
		return "", invalid(param, "must not be empty")
	}
	return text, nil
}
