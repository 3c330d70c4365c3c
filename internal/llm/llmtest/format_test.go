package llmtest

import "testing"

// These tests pin down which structured output formats each fake refuses,
// on raw JSON; the providers' tests send them through the official SDKs.

const strictSchema = `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`

func TestChatFormatRules(t *testing.T) {
	cases := []historyCase{
		{"none", ``, "", ""},
		{"text", `"response_format":{"type":"text"},`, "", ""},
		{"a strict schema", `"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":` + strictSchema + `}},`, "", ""},
		{"a loose schema, not strict", `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},`, "", ""},
		{"an unknown type", `"response_format":{"type":"yaml"},`,
			"Invalid value: 'yaml'. Supported values are: 'text', 'json_object', and 'json_schema'.", "response_format.type"},
		{"no json_schema", `"response_format":{"type":"json_schema"},`,
			"Missing required parameter: 'response_format.json_schema'.", "response_format.json_schema"},
		{"no name", `"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object"}}},`,
			"Missing required parameter: 'response_format.json_schema.name'.", "response_format.json_schema.name"},
		{"a schema that is not an object", `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":"s"}},`,
			"Invalid type for 'response_format.json_schema.schema': expected an object.", "response_format.json_schema.schema"},
		{"strict without additionalProperties", `"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{}}}},`,
			"Invalid schema for response_format 'x': In context=(), 'additionalProperties' is required to be supplied and to be false.", "response_format.json_schema.schema"},
		{"strict with an optional property", `"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}}},`,
			"Invalid schema for response_format 'x': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'a'.", "response_format.json_schema.schema"},
	}
	checkHistory(t, cases,
		func(h string) string {
			return `{"model":"m","stream":true,` + h + `"messages":[{"role":"user","content":"hi"}]}`
		},
		func(b []byte) *historyError { return chatFormatError(parseOpenAI(t, b)) })
}

func TestResponsesFormatRules(t *testing.T) {
	cases := []historyCase{
		{"none", ``, "", ""},
		{"a strict schema", `"text":{"format":{"type":"json_schema","name":"x","strict":true,"schema":` + strictSchema + `}},`, "", ""},
		{"no name", `"text":{"format":{"type":"json_schema","schema":{"type":"object"}}},`,
			"Missing required parameter: 'text.format.name'.", "text.format.name"},
		{"an unknown type", `"text":{"format":{"type":"xml"}},`,
			"Invalid value: 'xml'. Supported values are: 'text', 'json_object', and 'json_schema'.", "text.format.type"},
	}
	checkHistory(t, cases,
		func(h string) string { return `{"model":"m","stream":true,` + h + `"input":"hi"}` },
		func(b []byte) *historyError { return responsesFormatError(parseOpenAI(t, b)) })
}

func TestAnthropicFormatRules(t *testing.T) {
	cases := []historyCase{
		{"none", ``, "", ""},
		{"a schema", `"output_config":{"format":{"type":"json_schema","schema":` + strictSchema + `}},`, "", ""},
		{"an effort alone", `"output_config":{"effort":"low"},`, "", ""},
		{"no type", `"output_config":{"format":{"schema":{"type":"object"}}},`, "output_config.format.type: Field required", ""},
		{"another type", `"output_config":{"format":{"type":"json","schema":{"type":"object"}}},`, "output_config.format.type: Input should be 'json_schema'", ""},
		{"no schema", `"output_config":{"format":{"type":"json_schema"}},`, "output_config.format.schema: Field required", ""},
	}
	checkHistory(t, cases,
		func(h string) string {
			return `{"model":"m","max_tokens":10,` + h + `"messages":[{"role":"user","content":"hi"}]}`
		},
		anthropicFormatError)
}
