package facade

import (
	"bytes"
	"encoding/json"

	"github.com/parleyhq/parley/internal/chat"
)

// jsonObjectFormat is the format a json_object response format asks for:
// any JSON object, which parley checks as it checks a schema.
var jsonObjectFormat = chat.OutputFormat{Name: "json_object", Schema: json.RawMessage(`{"type":"object"}`)}

// completionFormat reads a Chat Completions response_format: nil for none,
// a "text" format for {"type": "text"}; {"type": "json_schema", "json_schema": {"name",
// "schema", "strict"}} as it is; {"type": "json_object"} as a schema that
// takes any object. A bad one is a 400 naming its field.
func completionFormat(raw json.RawMessage) (*chat.ResponseFormat, error) {
	if isNull(raw) {
		return nil, nil
	}
	var rf struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, invalid("response_format", "must be an object with a type: text, json_schema or json_object")
	}
	switch rf.Type {
	case chat.FormatText:
		return &chat.ResponseFormat{Type: chat.FormatText}, nil
	case "json_object":
		return &chat.ResponseFormat{Type: chat.FormatJSONSchema, JSONSchema: jsonObjectFormat}, nil
	case chat.FormatJSONSchema:
		if isNull(rf.JSONSchema) {
			return nil, invalid("response_format.json_schema", "is required when the type is json_schema")
		}
		return schemaFormat(rf.JSONSchema, "response_format.json_schema")
	}
	return nil, invalid("response_format.type", "%q must be text, json_schema or json_object", rf.Type)
}

// responsesFormat reads a Responses request's text.format: nil for none, a
// "text" format for {"type": "text"}; {"type": "json_schema", "name",
// "schema", "strict"} and
// {"type": "json_object"} as in Chat Completions.
func responsesFormat(text *respText) (*chat.ResponseFormat, error) {
	if text == nil || isNull(text.Format) {
		return nil, nil
	}
	var rf struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(text.Format, &rf); err != nil {
		return nil, invalid("text.format", "must be an object with a type: text, json_schema or json_object")
	}
	switch rf.Type {
	case chat.FormatText:
		return &chat.ResponseFormat{Type: chat.FormatText}, nil
	case "json_object":
		return &chat.ResponseFormat{Type: chat.FormatJSONSchema, JSONSchema: jsonObjectFormat}, nil
	case chat.FormatJSONSchema:
		return schemaFormat(text.Format, "text.format")
	}
	return nil, invalid("text.format.type", "%q must be text, json_schema or json_object", rf.Type)
}

// schemaFormat reads and checks {"name", "schema", "strict"} at param.
func schemaFormat(raw json.RawMessage, param string) (*chat.ResponseFormat, error) {
	var of chat.OutputFormat
	var fields struct {
		Name   json.RawMessage `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict json.RawMessage `json:"strict"`
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, invalid(param, "must be an object with a name, a schema and strict")
	}
	if !isNull(fields.Name) && json.Unmarshal(fields.Name, &of.Name) != nil {
		return nil, invalid(param+".name", "must be a string")
	}
	if !isNull(fields.Strict) && json.Unmarshal(fields.Strict, &of.Strict) != nil {
		return nil, invalid(param+".strict", "must be a boolean")
	}
	if isNull(fields.Schema) {
		return nil, invalid(param+".schema", "is required: a JSON Schema whose root is an object")
	}
	of.Schema = fields.Schema
	if err := of.Check(param); err != nil {
		return nil, err
	}
	return &chat.ResponseFormat{Type: chat.FormatJSONSchema, JSONSchema: of}, nil
}

// isNull reports JSON that is absent or null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// structuredStep is step m of a run whose turn has a response format, as
// the client sees it: its text is the final answer's JSON (its output
// part) or nothing. A step's other text (before a tool call, or an answer
// parley had the model repair) is not the answer, which must parse as
// JSON whole.
func structuredStep(m chat.Message) chat.Message {
	var parts []chat.Part
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
		case chat.PartOutput:
			parts = append(parts, chat.TextPart(string(p.JSON)))
		default:
			parts = append(parts, p)
		}
	}
	m.Parts = parts
	return m
}
