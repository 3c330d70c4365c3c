package llmtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
)

// The fakes refuse a malformed structured output format as the APIs do:
// Chat Completions' response_format, Responses' text.format and
// Anthropic's output_config.format, each with the real message and param.
// A strict OpenAI schema must also be what strict mode supports at its
// objects: additionalProperties false and every property required.

// openaiFormatName is OpenAI's rule for a format's name.
var openaiFormatName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// chatFormatError checks a Chat Completions request's response_format.
func chatFormatError(req openaiRequest) *historyError {
	raw, ok := req.raw["response_format"]
	if !ok {
		return nil
	}
	var f struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return &historyError{"Invalid type for 'response_format': expected an object.", "response_format"}
	}
	switch f.Type {
	case "text", "json_object":
		return nil
	case "json_schema":
		if len(f.JSONSchema) == 0 {
			return &historyError{"Missing required parameter: 'response_format.json_schema'.", "response_format.json_schema"}
		}
		return openaiSchemaError(f.JSONSchema, "response_format.json_schema", "response_format")
	}
	return &historyError{fmt.Sprintf("Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", f.Type), "response_format.type"}
}

// responsesFormatError checks a Responses request's text.format.
func responsesFormatError(req openaiRequest) *historyError {
	raw, ok := req.raw["text"]
	if !ok {
		return nil
	}
	var text struct {
		Format json.RawMessage `json:"format"`
	}
	if err := json.Unmarshal(raw, &text); err != nil {
		return &historyError{"Invalid type for 'text': expected an object.", "text"}
	}
	if len(text.Format) == 0 {
		return nil
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(text.Format, &f); err != nil {
		return &historyError{"Invalid type for 'text.format': expected an object.", "text.format"}
	}
	switch f.Type {
	case "text", "json_object":
		return nil
	case "json_schema":
		return openaiSchemaError(text.Format, "text.format", "text.format")
	}
	return &historyError{fmt.Sprintf("Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", f.Type), "text.format.type"}
}

// openaiSchemaError checks the json_schema object at param: its name, its
// schema (an object) and, when strict, what strict mode supports.
func openaiSchemaError(raw json.RawMessage, param, kind string) *historyError {
	var js struct {
		Name   *string         `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &js); err != nil {
		return &historyError{fmt.Sprintf("Invalid type for '%s': expected an object.", param), param}
	}
	if js.Name == nil {
		return &historyError{fmt.Sprintf("Missing required parameter: '%s.name'.", param), param + ".name"}
	}
	if !openaiFormatName.MatchString(*js.Name) {
		return &historyError{fmt.Sprintf("Invalid '%s.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", param), param + ".name"}
	}
	var schema map[string]any
	if len(js.Schema) > 0 && json.Unmarshal(js.Schema, &schema) != nil {
		return &historyError{fmt.Sprintf("Invalid type for '%s.schema': expected an object.", param), param + ".schema"}
	}
	if js.Strict != nil && *js.Strict {
		if why := strictSchemaError(schema, "()"); why != "" {
			return &historyError{fmt.Sprintf("Invalid schema for %s '%s': %s", kind, *js.Name, why), param + ".schema"}
		}
	}
	return nil
}

// strictSchemaError says why schema is not what OpenAI's strict mode
// takes at an object of it ("" if it is).
func strictSchemaError(schema map[string]any, at string) string {
	if schema["type"] == "object" {
		if schema["additionalProperties"] != false {
			return fmt.Sprintf("In context=%s, 'additionalProperties' is required to be supplied and to be false.", at)
		}
		props, _ := schema["properties"].(map[string]any)
		var names []string
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		var required []string
		if rs, ok := schema["required"].([]any); ok {
			for _, r := range rs {
				if s, ok := r.(string); ok {
					required = append(required, s)
				}
			}
		}
		for _, name := range names {
			if !slices.Contains(required, name) {
				return fmt.Sprintf("In context=%s, 'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", at, name)
			}
			if sub, ok := props[name].(map[string]any); ok {
				if why := strictSchemaError(sub, fmt.Sprintf("('properties', '%s')", name)); why != "" {
					return why
				}
			}
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		return strictSchemaError(items, at+"/items")
	}
	return ""
}

// anthropicFormatError checks a Messages request's output_config.format.
func anthropicFormatError(body []byte) *historyError {
	var req struct {
		OutputConfig *struct {
			Format *struct {
				Type   *string         `json:"type"`
				Schema json.RawMessage `json:"schema"`
			} `json:"format"`
		} `json:"output_config"`
	}
	if json.Unmarshal(body, &req) != nil || req.OutputConfig == nil || req.OutputConfig.Format == nil {
		return nil
	}
	f := req.OutputConfig.Format
	switch {
	case f.Type == nil:
		return &historyError{"output_config.format.type: Field required", ""}
	case *f.Type != "json_schema":
		return &historyError{"output_config.format.type: Input should be 'json_schema'", ""}
	case len(f.Schema) == 0:
		return &historyError{"output_config.format.schema: Field required", ""}
	}
	var schema map[string]any
	if json.Unmarshal(f.Schema, &schema) != nil {
		return &historyError{"output_config.format.schema: Input should be a valid dictionary", ""}
	}
	return nil
}
