package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
)

// messages maps parley's history to Messages API input.
//
// User text becomes text blocks; assistant text and tool calls become text
// and tool_use blocks; tool messages become tool_result blocks in a user
// turn. Consecutive messages of the same API role are merged into one, so
// the results of one assistant turn's calls travel in the single user
// message the API expects right after it (results first, in history order).
//
// Reasoning parts are dropped. The API accepts a thinking block back only
// with the signature it streamed, and chat.Part has no field for it; nor can
// reasoning from another provider be signed. This is correct because this
// provider never enables extended thinking, and without it the API needs no
// earlier thinking. Enabling thinking would need the signature kept in the
// part, since a tool-use continuation must then replay the signed block.
func messages(history []chat.Message) ([]sdk.MessageParam, error) {
	var out []sdk.MessageParam
	lastRole := ""
	for _, m := range history {
		role, err := apiRole(m.Role)
		if err != nil {
			return nil, err
		}
		blocks := contentBlocks(m.Parts)
		if len(blocks) == 0 {
			continue
		}
		if role == lastRole {
			prev := &out[len(out)-1]
			if role == "user" {
				prev.OfUser.Content = append(prev.OfUser.Content, blocks...)
			} else {
				prev.OfAssistant.Content = append(prev.OfAssistant.Content, blocks...)
			}
			continue
		}
		if role == "user" {
			out = append(out, sdk.NewUserMessage(blocks...))
		} else {
			out = append(out, sdk.NewAssistantMessage(blocks...))
		}
		lastRole = role
	}
	if len(out) == 0 {
		return nil, &llm.Error{Kind: "bad_request", Provider: ProviderName, Message: "no message to send"}
	}
	return out, nil
}

// apiRole is the Messages API role that carries a parley message.
func apiRole(r chat.Role) (string, error) {
	switch r {
	case chat.RoleUser, chat.RoleTool:
		return "user", nil
	case chat.RoleAssistant:
		return "assistant", nil
	}
	return "", &llm.Error{Kind: "bad_request", Provider: ProviderName, Message: fmt.Sprintf("unknown message role %q", r)}
}

// contentBlocks maps parts to content blocks, in order; empty text and
// reasoning parts have none. A file becomes an image block (a base64
// source with its media type, or a URL source for an image on the web), a
// PDF a document block (a base64 source, titled with the file's name), and
// a text file, or a file that cannot be sent, a text block (llm.FileOf).
func contentBlocks(parts []chat.Part) []sdk.ContentBlockParamUnion {
	var blocks []sdk.ContentBlockParamUnion
	for _, p := range parts {
		switch p.Type {
		case chat.PartText:
			if p.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(p.Text))
			}
		case chat.PartFile:
			blocks = append(blocks, fileBlock(llm.FileOf(p)))
		case chat.PartToolCall:
			blocks = append(blocks, sdk.NewToolUseBlock(p.ToolCallID, toolInput(p.Args), p.ToolName))
		case chat.PartToolResult:
			blocks = append(blocks, toolResult(p))
		}
	}
	return blocks
}

// fileBlock maps a file to its content block.
func fileBlock(f llm.File) sdk.ContentBlockParamUnion {
	switch {
	case f.Kind == chat.FileImage && f.RemoteURL != "":
		return sdk.NewImageBlock(sdk.URLImageSourceParam{URL: f.RemoteURL})
	case f.Kind == chat.FileImage:
		return sdk.NewImageBlockBase64(f.MediaType, f.Base64())
	case f.Kind == chat.FilePDF:
		var b sdk.ContentBlockParamUnion
		if f.RemoteURL != "" {
			b = sdk.NewDocumentBlock(sdk.URLPDFSourceParam{URL: f.RemoteURL})
		} else {
			b = sdk.NewDocumentBlock(sdk.Base64PDFSourceParam{Data: f.Base64()})
		}
		b.OfDocument.Title = sdk.String(f.Filename())
		return b
	}
	text := f.Text
	if text == "" {
		text = fmt.Sprintf("[file %s at %s]", f.Filename(), f.RemoteURL)
	}
	return sdk.NewTextBlock(text)
}

// toolInput is a call's arguments as the API takes them: a JSON object.
// Arguments that are not one (a model's malformed output, answered with an
// error result) are sent as {} so the history stays valid.
func toolInput(args json.RawMessage) json.RawMessage {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || args[0] != '{' || !json.Valid(args) {
		return json.RawMessage("{}")
	}
	return args
}

// toolResult maps a tool-result part to a tool_result block. A JSON string
// output is sent as its text, any other JSON as written; an empty or null
// output sends no content.
func toolResult(p chat.Part) sdk.ContentBlockParamUnion {
	b := sdk.ToolResultBlockParam{ToolUseID: p.ToolCallID}
	if p.IsError {
		b.IsError = sdk.Bool(true)
	}
	if text := outputText(p.Output); text != "" {
		b.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: text}}}
	}
	return sdk.ContentBlockParamUnion{OfToolResult: &b}
}

// outputText is the text the model reads for a tool's output.
func outputText(out json.RawMessage) string {
	out = bytes.TrimSpace(out)
	if len(out) == 0 || string(out) == "null" {
		return ""
	}
	var s string
	if out[0] == '"' && json.Unmarshal(out, &s) == nil {
		return s
	}
	return string(out)
}

// tools maps tool definitions; the input schema is sent as written (an
// empty one as {"type":"object"}).
func tools(defs []llm.ToolDef) []sdk.ToolUnionParam {
	var out []sdk.ToolUnionParam
	for _, d := range defs {
		schema := bytes.TrimSpace(d.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		t := sdk.ToolParam{
			Name:        d.Name,
			InputSchema: param.Override[sdk.ToolInputSchemaParam](json.RawMessage(schema)),
		}
		if d.Description != "" {
			t.Description = sdk.String(d.Description)
		}
		out = append(out, sdk.ToolUnionParam{OfTool: &t})
	}
	return out
}
