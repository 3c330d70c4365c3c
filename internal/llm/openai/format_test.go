package openai_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// invoice is a strict structured output format.
var invoice = chat.OutputFormat{Name: "invoice", Strict: true, Schema: json.RawMessage(
	`{"type":"object","properties":{"total":{"type":"number"},"items":{"type":"array","items":{"type":"string"}}},"required":["total","items"],"additionalProperties":false}`)}

// TestStructuredOutputIsNative: a request's format goes as Chat
// Completions' response_format and as Responses' text.format, name,
// schema and strict as given; the fakes take them as the APIs do.
func TestStructuredOutputIsNative(t *testing.T) {
	want := map[string]struct{ path []string }{
		"openai":           {[]string{"response_format"}},
		"openai-responses": {[]string{"text", "format"}},
	}
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		f.Push(llmtest.Turn{Text: `{"total":1,"items":[]}`})
		req := hello
		req.Format = &invoice
		if _, _, err := stream(t, p, req); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		var body map[string]any
		if err := json.Unmarshal(f.Requests()[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		var got any = body
		for _, k := range want[a.name].path {
			got = got.(map[string]any)[k]
		}
		var schema any
		_ = json.Unmarshal(invoice.Schema, &schema)
		wantFormat := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "invoice", "strict": true, "schema": schema}}
		if a.name == "openai-responses" {
			wantFormat = map[string]any{"type": "json_schema", "name": "invoice", "strict": true, "schema": schema}
		}
		if !reflect.DeepEqual(got, wantFormat) {
			t.Fatalf("%v = %v\nwant %v", want[a.name].path, got, wantFormat)
		}
		// Without a format, none is sent.
		f.Push(llmtest.Turn{Text: "hi"})
		if _, _, err := stream(t, p, hello); err != nil {
			t.Fatal(err)
		}
		if b := string(f.Requests()[1].Body); strings.Contains(b, "json_schema") {
			t.Fatalf("a request without a format sent %s", b)
		}
	})
}

// TestStrictSchemaRefusedLikeTheAPI: a strict schema strict mode does not
// take (an object without additionalProperties: false) is refused with
// the API's 400 naming the schema.
func TestStrictSchemaRefusedLikeTheAPI(t *testing.T) {
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		f.Push(llmtest.Turn{Text: "unused"})
		req := hello
		req.Format = &chat.OutputFormat{Name: "loose", Strict: true, Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)}
		_, _, err := stream(t, p, req)
		var le *llm.Error
		if !asLLMError(err, &le) || le.HTTPStatus != 400 || !strings.Contains(le.Message, "additionalProperties") {
			t.Fatalf("err = %v; want the API's 400 about additionalProperties", err)
		}
	})
}

func asLLMError(err error, target **llm.Error) bool { return errors.As(err, target) }
