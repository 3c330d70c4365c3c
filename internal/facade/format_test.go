package facade_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// personSchema is the schema the structured-output tests ask for.
func personSchema() map[string]any {
	return map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer"}},
		"required":             []any{"name", "age"},
		"additionalProperties": false,
	}
}

// schemaFormat is a Chat Completions response_format asking for schema.
func schemaFormat(name string, schema any) openai.ChatCompletionNewParamsResponseFormatUnion {
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: name, Schema: schema, Strict: openai.Bool(true)}}}
}

// textFormat is a Responses text option asking for schema.
func textFormat(name string, schema map[string]any) responses.ResponseTextConfigParam {
	return responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
		OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: name, Schema: schema, Strict: openai.Bool(true)}}}
}

// TestResponseFormatRefused checks that a bad response_format or
// text.format is a 400 naming its field, before anything is written.
func TestResponseFormatRefused(t *testing.T) {
	r, fake := newSQLite(t)
	ctx := context.Background()
	c := r.client(r.token("alice"))
	hi := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}

	for _, tc := range []struct {
		name   string
		format openai.ChatCompletionNewParamsResponseFormatUnion
		param  string
	}{
		{"array root", schemaFormat("list", map[string]any{"type": "array"}), "response_format.json_schema.schema"},
		{"no schema", schemaFormat("person", nil), "response_format.json_schema.schema"},
		{"not a schema", schemaFormat("person", map[string]any{"type": "object", "properties": 3}), "response_format.json_schema.schema"},
		{"remote ref", schemaFormat("person", map[string]any{"$ref": "https://example.com/person.json"}), "response_format.json_schema.schema"},
		{"bad name", schemaFormat("a person", personSchema()), "response_format.json_schema.name"},
	} {
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake", Messages: hi, ResponseFormat: tc.format})
		t.Run(tc.name, func(t *testing.T) { expectError(t, err, http.StatusBadRequest, "invalid_request_error", tc.param, "") })
	}
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake", Messages: hi},
		option.WithJSONSet("response_format", map[string]any{"type": "xml"}))
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "response_format.type", "")
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake", Messages: hi},
		option.WithJSONSet("response_format", map[string]any{"type": "json_schema"}))
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "response_format.json_schema", "")
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake", Messages: hi},
		option.WithJSONSet("response_format", "json"))
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "response_format", "")

	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("hi"),
		Text: textFormat("list", map[string]any{"type": "array"})})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "text.format.schema", "")
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("hi"),
		Text: textFormat("a person", personSchema())})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "text.format.name", "")
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("hi")},
		option.WithJSONSet("text.format", map[string]any{"type": "json_schema", "name": "person"}))
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "text.format.schema", "")
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("hi")},
		option.WithJSONSet("text.format", map[string]any{"type": "grammar"}))
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "text.format.type", "")

	if n := len(r.chats("alice")); n != 0 || len(fake.Requests()) != 0 {
		t.Fatalf("refused requests left %d chats and %d model requests", n, len(fake.Requests()))
	}
}

// TestUnknownAgent checks that "agent:<name>" of no agent is OpenAI's 404
// model_not_found, as an unknown model is, on every route that names one.
func TestUnknownAgent(t *testing.T) {
	r, _ := newSQLite(t)
	ctx := context.Background()
	c := r.client(r.token("alice"))
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "agent:nobody",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	expectError(t, err, http.StatusNotFound, "invalid_request_error", "model", "model_not_found")
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "agent:nobody", Input: text("hi")})
	expectError(t, err, http.StatusNotFound, "invalid_request_error", "model", "model_not_found")
	_, err = c.Models.Get(ctx, "agent:nobody")
	expectError(t, err, http.StatusNotFound, "invalid_request_error", "model", "model_not_found")
	if n := len(r.chats("alice")); n != 0 {
		t.Fatalf("refused requests left %d chats", n)
	}
}
