package facade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
)

// labelResponses is the "api" label of the chats of the Responses API.
const labelResponses = "openai-responses"

// responsesRequest is what parley reads of a Responses request; fields it
// does not know are ignored (docs/openai-compat.md lists them).
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       string          `json:"instructions"`
	Tools              []respTool      `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	PreviousResponseID string          `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         bool            `json:"background"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	Temperature        *float64        `json:"temperature"`
	MaxOutputTokens    *int64          `json:"max_output_tokens"`
	User               string          `json:"user"`
	Text               *respText       `json:"text"`

	// use is what Model names (readRequest), format its text.format
	// (check): nil when it has none.
	use    runModel
	format *chat.ResponseFormat
}

// respText is a Responses request's text options: the answer's format.
type respText struct {
	Format json.RawMessage `json:"format"`
}

// respTool is a tool in the Responses shape: a function's fields at the
// top level.
type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// inputItem is one item of a request's input: a message (with or without
// "type": "message"), a function call the model made, or its output.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// check refuses what parley cannot serve, before anything is written.
func (r *responsesRequest) check() error {
	if r.Model == "" {
		return invalid("model", "you must provide a model parameter")
	}
	if len(bytes.TrimSpace(r.Conversation)) > 0 && string(bytes.TrimSpace(r.Conversation)) != "null" {
		return invalid("conversation", "parley continues conversations by previous_response_id only")
	}
	if r.Background {
		return invalid("background", "parley does not run responses in the background: every request waits for its run (which goes on if the client leaves)")
	}
	f, err := responsesFormat(r.Text)
	if err != nil {
		return err
	}
	r.format = f
	return nil
}

// items reads the input: a string is one user message.
func (r *responsesRequest) items() ([]inputItem, error) {
	raw := bytes.TrimSpace(r.Input)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("input", "you must provide an input")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid("input", "is not a valid JSON string")
		}
		text, _ := json.Marshal(s)
		return []inputItem{{Type: "message", Role: "user", Content: text}}, nil
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalid("input", "must be a string or an array of input items: %v", err)
	}
	if len(items) == 0 {
		return nil, invalid("input", "must hold at least one item")
	}
	return items, nil
}

// completion maps the request onto a Chat Completions request, whose
// checks and mapping to a chat's history parley shares: idx maps each of
// its messages back to the input item it came from.
func (r *responsesRequest) completion(items []inputItem) (*completionRequest, []int, error) {
	cr := &completionRequest{Model: r.Model, ToolChoice: r.ToolChoice, User: r.User, apiLabel: labelResponses, use: r.use, format: r.format}
	if err := cr.check(); err != nil {
		return nil, nil, err
	}
	for i, t := range r.Tools {
		if t.Type != "function" {
			return nil, nil, invalid(fmt.Sprintf("tools[%d].type", i), "%q is not supported: parley takes function tools only (its own tools run server-side)", t.Type)
		}
		if t.Name == "" {
			return nil, nil, invalid(fmt.Sprintf("tools[%d].name", i), "a function tool needs a name")
		}
		var it inTool
		it.Type = "function"
		it.Function.Name, it.Function.Description, it.Function.Parameters = t.Name, t.Description, t.Parameters
		cr.Tools = append(cr.Tools, it)
	}
	var idx []int
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			raw, err := itemContent(it, param+".content")
			if err != nil {
				return nil, nil, err
			}
			cr.Messages = append(cr.Messages, inMessage{Role: it.Role, Content: raw})
			idx = append(idx, i)
		case "function_call":
			n := len(cr.Messages)
			if n == 0 || cr.Messages[n-1].Role != "assistant" {
				cr.Messages = append(cr.Messages, inMessage{Role: "assistant"})
				idx = append(idx, i)
				n++
			}
			var c inToolCall
			c.ID, c.Type = it.CallID, "function"
			c.Function.Name, c.Function.Arguments = it.Name, it.Arguments
			cr.Messages[n-1].ToolCalls = append(cr.Messages[n-1].ToolCalls, c)
		case "function_call_output":
			text, err := itemText(it.Output, param+".output")
			if err != nil {
				return nil, nil, err
			}
			raw, _ := json.Marshal(text)
			cr.Messages = append(cr.Messages, inMessage{Role: "tool", Content: raw, ToolCallID: it.CallID})
			idx = append(idx, i)
		default:
			return nil, nil, invalid(param+".type", "%q is not supported: parley takes messages, function_call and function_call_output items", it.Type)
		}
	}
	return cr, idx, nil
}

// itemContent is a message item's content as a Chat Completions message
// holds it: a user message's input_text, input_image and input_file parts
// as text, image_url and file parts (checked there), any other message's
// text as a string.
func itemContent(it inputItem, param string) (json.RawMessage, error) {
	raw := bytes.TrimSpace(it.Content)
	if it.Role != "user" || len(raw) == 0 || raw[0] != '[' {
		text, err := itemText(raw, param)
		if err != nil {
			return nil, err
		}
		out, _ := json.Marshal(text)
		return out, nil
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
		FileData string          `json:"file_data"`
		FileID   string          `json:"file_id"`
		FileURL  string          `json:"file_url"`
		Filename string          `json:"filename"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, invalid(param, "must be a string or an array of content parts")
	}
	out := make([]inPart, len(parts))
	for j, p := range parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		switch p.Type {
		case "input_text", "text":
			out[j] = inPart{Type: "text", Text: p.Text}
		case "input_image":
			var url string
			if p.FileID != "" || json.Unmarshal(p.ImageURL, &url) != nil || url == "" {
				return nil, invalid(pp+".image_url", "an input_image needs an image_url: an http(s) URL or a base64 data URL (parley does not know OpenAI file ids)")
			}
			out[j] = inPart{Type: "image_url", ImageURL: &inImageURL{URL: url}}
		case "input_file":
			if p.FileID != "" || p.FileURL != "" || p.FileData == "" {
				return nil, invalid(pp+".file_data", "an input_file needs file_data, a base64 data URL (parley takes neither OpenAI file ids nor file_url)")
			}
			out[j] = inPart{Type: "file", File: &inFile{FileData: p.FileData, Filename: p.Filename}}
		default:
			return nil, invalid(pp+".type", "%q is not supported: a user message takes input_text, input_image and input_file parts", p.Type)
		}
	}
	return json.Marshal(out)
}

// itemText reads an item's content or output: a string, or an array of
// input_text / output_text (or refusal) parts, joined.
func itemText(raw json.RawMessage, param string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return contentText(raw, param, true)
	}
	return partsText(raw, param, "input_text", "output_text", "text")
}

var messagesParam = regexp.MustCompile(`^messages\[(\d+)\](.*)$`)

// inputError names, in a Responses request's terms, the field an error
// found in the Chat Completions request it was mapped onto is about.
func inputError(err error, idx []int) error {
	ae := toAPIError(err)
	if ae.Param == nil {
		return ae
	}
	p := *ae.Param
	switch m := messagesParam.FindStringSubmatch(p); {
	case m != nil:
		k, _ := strconv.Atoi(m[1])
		rest := strings.Replace(m[2], ".tool_call_id", ".call_id", 1)
		rest = strings.Replace(rest, ".image_url.url", ".image_url", 1)
		rest = strings.Replace(rest, ".file.", ".", 1)
		if strings.HasPrefix(rest, ".tool_calls") {
			rest = ""
		}
		if k < len(idx) {
			p = fmt.Sprintf("input[%d]%s", idx[k], rest)
		} else {
			p = "input"
		}
	case p == "messages":
		p = "input"
	case strings.HasPrefix(p, "tools["):
		p = strings.Replace(p, ".function.", ".", 1)
	}
	out := *ae
	out.Param = &p
	out.Message = strings.ReplaceAll(out.Message, "messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
		"a function_call_output item must answer a function_call item before it")
	out.Message = strings.ReplaceAll(out.Message, "the assistant message before it", "the function_call items before it")
	return &out
}
