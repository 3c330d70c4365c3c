package anthropic_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestStructuredOutput: a strict format goes natively as
// output_config.format; any other is stated in the system prompt, after
// the chat's own.
func TestStructuredOutput(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"total":{"type":"number"}},"required":["total"],"additionalProperties":false}`)
	p, f := setup(t)
	f.Push(llmtest.Turn{Text: `{"total":1}`}, llmtest.Turn{Text: `{"total":2}`})

	req := hello()
	req.System = "Be brief."
	req.Format = &chat.OutputFormat{Name: "total", Schema: schema, Strict: true}
	if _, err := p.Stream(t.Context(), req, nopEmit); err != nil {
		t.Fatal(err)
	}
	var body struct {
		System       []struct{ Text string } `json:"system"`
		OutputConfig *struct {
			Format map[string]any `json:"format"`
		} `json:"output_config"`
	}
	if err := json.Unmarshal(f.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	_ = json.Unmarshal(schema, &want)
	if body.OutputConfig == nil || body.OutputConfig.Format["type"] != "json_schema" || !reflect.DeepEqual(body.OutputConfig.Format["schema"], any(want)) {
		t.Fatalf("output_config = %+v; want the schema as json_schema", body.OutputConfig)
	}
	if len(body.System) != 1 || body.System[0].Text != "Be brief." {
		t.Fatalf("system = %+v; want the chat's alone", body.System)
	}

	req.Format = &chat.OutputFormat{Name: "total", Schema: schema}
	if _, err := p.Stream(t.Context(), req, nopEmit); err != nil {
		t.Fatal(err)
	}
	body.OutputConfig, body.System = nil, nil
	if err := json.Unmarshal(f.Requests()[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.OutputConfig != nil || len(body.System) != 1 || !strings.HasPrefix(body.System[0].Text, "Be brief.\n\n") ||
		!strings.Contains(body.System[0].Text, `"additionalProperties":false`) || !strings.Contains(body.System[0].Text, "JSON Schema") {
		t.Fatalf("system = %+v, output_config %+v; want the format stated in the system prompt", body.System, body.OutputConfig)
	}
}

func nopEmit(llm.Event) error { return nil }
