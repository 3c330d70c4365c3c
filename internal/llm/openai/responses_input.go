package openai

import (
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
)

// responsesInput maps the history to Responses input items: a user or
// assistant message's text as a message item; each tool call as a
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
			if text := userText(m); text != "" {
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
