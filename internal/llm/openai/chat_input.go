package openai

import (
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
)

// chatMessages maps the system prompt and history to Chat Completions
// messages: the system prompt as a system message; a user message's text
// (with files, its parts: see userContent);
// an assistant message's text and tool calls (its reasoning dropped, see the
// package documentation); each tool result as its own "tool" message
// answering its call's id. An assistant message with nothing to send is
// left out.
func chatMessages(req llm.Request) []sdk.ChatCompletionMessageParamUnion {
	var msgs []sdk.ChatCompletionMessageParamUnion
	if req.System != "" {
		msgs = append(msgs, sdk.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		// Tool results go first, wherever they are stored: they answer the
		// previous assistant message.
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult {
				msgs = append(msgs, sdk.ToolMessage(toolOutput(p), p.ToolCallID))
			}
		}
		switch m.Role {
		case chat.RoleUser:
			if parts := userContent(m); parts != nil {
				msgs = append(msgs, sdk.UserMessage(parts))
			} else if text := userText(m); text != "" {
				msgs = append(msgs, sdk.UserMessage(text))
			}
		case chat.RoleAssistant:
			if a, ok := assistantMessage(m); ok {
				msgs = append(msgs, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
			}
		}
	}
	return msgs
}

// userContent maps a user message that holds files to content parts, in
// the message's order: text as text parts; an image as an image_url part
// (its http(s) URL, or its bytes as a base64 data URL); a PDF as a file
// part with its bytes as a data URL and its name; a text file, or a file
// that cannot be sent, as a text part (llm.FileOf). A message without
// files is nil: it goes as a string, as it always has.
func userContent(m chat.Message) []sdk.ChatCompletionContentPartUnionParam {
	if !hasFiles(m) {
		return nil
	}
	var parts []sdk.ChatCompletionContentPartUnionParam
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			if p.Text != "" {
				parts = append(parts, sdk.TextContentPart(p.Text))
			}
		case chat.PartFile:
			f := llm.FileOf(p)
			switch {
			case f.Kind == chat.FileImage && f.RemoteURL != "":
				parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: f.RemoteURL}))
			case f.Kind == chat.FileImage:
				parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: f.DataURL()}))
			case f.Kind == chat.FilePDF && f.RemoteURL == "":
				parts = append(parts, sdk.FileContentPart(sdk.ChatCompletionContentPartFileFileParam{
					FileData: sdk.String(f.DataURL()), Filename: sdk.String(f.Filename())}))
			default:
				parts = append(parts, sdk.TextContentPart(fileText(f)))
			}
		}
	}
	return parts
}

// assistantMessage maps an assistant message's text and tool calls.
func assistantMessage(m chat.Message) (sdk.ChatCompletionAssistantMessageParam, bool) {
	var a sdk.ChatCompletionAssistantMessageParam
	if text := userText(m); text != "" {
		a.Content.OfString = sdk.String(text)
	}
	for _, p := range m.Parts {
		if p.Type != chat.PartToolCall {
			continue
		}
		a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
				ID: p.ToolCallID,
				Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name:      p.ToolName,
					Arguments: callArgs(p),
				},
			},
		})
	}
	return a, a.Content.OfString.Valid() || len(a.ToolCalls) > 0
}

// chatTool declares a tool as a function with its JSON Schema.
func chatTool(t llm.ToolDef) (sdk.ChatCompletionToolUnionParam, error) {
	params, err := schema(t)
	if err != nil {
		return sdk.ChatCompletionToolUnionParam{}, err
	}
	def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
	if t.Description != "" {
		def.Description = sdk.String(t.Description)
	}
	return sdk.ChatCompletionFunctionTool(def), nil
}
