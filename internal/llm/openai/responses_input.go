package openai

import (
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
)

// responsesInput maps the history to Responses input items: a user or
// assistant message's text as a message item (a user message with files
// as a list of its parts: see userInputContent); each tool call as a
// function_call item; each tool result as a function_call_output item
// answering its call's id. Reasoning is dropped (see the package
// documentation). The system prompt travels as instructions instead.
func responsesInput(history []chat.Message) responses.ResponseInputParam {
	var items responses.ResponseInputParam
	for _, m := range history {
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult {
				out := responses.ResponseInputItemParamOfFunctionCallOutput(toolOutput(p))
				out.OfFunctionCallOutput.CallID = sdk.String(p.ToolCallID)
				items = append(items, out)
			}
		}
		switch m.Role {
		case chat.RoleUser:
			if parts := userInputContent(m); parts != nil {
				items = append(items, responses.ResponseInputItemParamOfMessage(parts, responses.EasyInputMessageRoleUser))
			} else if text := userText(m); text != "" {
				items = append(items, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
			}
		case chat.RoleAssistant:
			if text := userText(m); text != "" {
				items = append(items, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleAssistant))
			}
			for _, p := range m.Parts {
				if p.Type == chat.PartToolCall {
					items = append(items, responses.ResponseInputItemParamOfFunctionCall(callArgs(p), p.ToolCallID, p.ToolName))
				}
			}
		}
	}
	return items
}

// userInputContent maps a user message that holds files to input content,
// in the message's order: text as input_text; an image as input_image
// (its http(s) URL, or its bytes as a base64 data URL); a PDF as
// input_file with its bytes as a data URL (or its URL) and its name; a
// text file, or a file that cannot be sent, as input_text (llm.FileOf). A
// message without files is nil: it goes as a string.
func userInputContent(m chat.Message) responses.ResponseInputMessageContentListParam {
	if !hasFiles(m) {
		return nil
	}
	var parts responses.ResponseInputMessageContentListParam
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			if p.Text != "" {
				parts = append(parts, responses.ResponseInputContentParamOfInputText(p.Text))
			}
		case chat.PartFile:
			f := llm.FileOf(p)
			switch f.Kind {
			case chat.FileImage:
				img := responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto)
				url := f.RemoteURL
				if url == "" {
					url = f.DataURL()
				}
				img.OfInputImage.ImageURL = sdk.String(url)
				parts = append(parts, img)
			case chat.FilePDF:
				in := &responses.ResponseInputFileParam{Filename: sdk.String(f.Filename())}
				if f.RemoteURL != "" {
					in.FileURL = sdk.String(f.RemoteURL)
				} else {
					in.FileData = sdk.String(f.DataURL())
				}
				parts = append(parts, responses.ResponseInputContentUnionParam{OfInputFile: in})
			default:
				parts = append(parts, responses.ResponseInputContentParamOfInputText(fileText(f)))
			}
		}
	}
	return parts
}

// responsesTool declares a tool as a function with its JSON Schema. Strict
// mode, the API's default, is turned off: it demands schemas parley's tools
// need not follow (every property required, no additional properties).
func responsesTool(t llm.ToolDef) (responses.ToolUnionParam, error) {
	params, err := schema(t)
	if err != nil {
		return responses.ToolUnionParam{}, err
	}
	tool := responses.ToolParamOfFunction(t.Name, params, false)
	if t.Description != "" {
		tool.OfFunction.Description = sdk.String(t.Description)
	}
	return tool, nil
}
