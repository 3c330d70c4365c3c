package chat

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestValidateDynamicTools(t *testing.T) {
	obj := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	server := func(n string) bool { return n == "http_fetch" }
	many := make([]DynamicTool, DefaultLimits.MaxDynamicTools+1)
	for i := range many {
		many[i] = DynamicTool{Name: fmt.Sprintf("t%d", i), InputSchema: obj}
	}
	cases := []struct {
		name  string
		tools []DynamicTool
		field string // "" means valid
	}{
		{"valid", []DynamicTool{{Name: "get_weather", InputSchema: obj}, {Name: "b-2", InputSchema: json.RawMessage(`{"type":"object"}`)}}, ""},
		{"bad name", []DynamicTool{{Name: "get weather", InputSchema: obj}}, "dynamic_tools[0].name"},
		{"empty name", []DynamicTool{{Name: "", InputSchema: obj}}, "dynamic_tools[0].name"},
		{"long name", []DynamicTool{{Name: strings.Repeat("a", 65), InputSchema: obj}}, "dynamic_tools[0].name"},
		{"duplicate", []DynamicTool{{Name: "a", InputSchema: obj}, {Name: "a", InputSchema: obj}}, "dynamic_tools[1].name"},
		{"server clash", []DynamicTool{{Name: "http_fetch", InputSchema: obj}}, "dynamic_tools[0].name"},
		{"missing schema", []DynamicTool{{Name: "a"}}, "dynamic_tools[0].input_schema"},
		{"not object", []DynamicTool{{Name: "a", InputSchema: json.RawMessage(`{"type":"string"}`)}}, "dynamic_tools[0].input_schema"},
		{"array schema", []DynamicTool{{Name: "a", InputSchema: json.RawMessage(`[1]`)}}, "dynamic_tools[0].input_schema"},
		{"invalid schema", []DynamicTool{{Name: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":12}}}`)}}, "dynamic_tools[0].input_schema"},
		{"remote ref", []DynamicTool{{Name: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"http://example.com/s.json"}}}`)}}, "dynamic_tools[0].input_schema"},
		{"too big", []DynamicTool{{Name: "a", InputSchema: json.RawMessage(`{"type":"object","description":"` + strings.Repeat("x", DefaultLimits.MaxToolSchemaBytes) + `"}`)}}, "dynamic_tools[0].input_schema"},
		{"too many", many, "dynamic_tools"},
		{"string output", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: json.RawMessage(`{"type":"string"}`)}}, ""},
		{"object output", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: obj}}, ""},
		{"true output", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: json.RawMessage(`true`)}}, ""},
		{"null output", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: json.RawMessage(`null`)}}, ""},
		{"both schemas near the limit", []DynamicTool{{Name: "a", InputSchema: nearLimit(`{"type":"object","description":"`), OutputSchema: nearLimit(`{"type":"string","description":"`)}}, ""},
		{"invalid output schema", []DynamicTool{{Name: "a", InputSchema: obj}, {Name: "b", InputSchema: obj, OutputSchema: json.RawMessage(`{"type":12}`)}}, "dynamic_tools[1].output_schema"},
		{"output schema not JSON", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: json.RawMessage(`{"type":`)}}, "dynamic_tools[0].output_schema"},
		{"output schema an array", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: json.RawMessage(`[{"type":"string"}]`)}}, "dynamic_tools[0].output_schema"},
		{"output schema a string", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: json.RawMessage(`"string"`)}}, "dynamic_tools[0].output_schema"},
		{"output remote ref", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: json.RawMessage(`{"$ref":"http://example.com/s.json"}`)}}, "dynamic_tools[0].output_schema"},
		{"output ref cycle", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: json.RawMessage(`{"$ref":"#"}`)}}, "dynamic_tools[0].output_schema"},
		{"output NUL", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: json.RawMessage(`{"const":"a\u0000"}`)}}, "dynamic_tools[0].output_schema"},
		{"output too big", []DynamicTool{{Name: "a", InputSchema: obj, OutputSchema: json.RawMessage(`{"type":"string","description":"` + strings.Repeat("x", DefaultLimits.MaxToolSchemaBytes) + `"}`)}}, "dynamic_tools[0].output_schema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateDynamicTools(tc.tools, server, DefaultLimits)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			ve, ok := err.(*ValidationError)
			if !ok || ve.Field != tc.field {
				t.Fatalf("want a validation error on %s, got %v", tc.field, err)
			}
		})
	}
}

// nearLimit is a schema that starts with prefix (an object's first key,
// open string) and is exactly the schema size limit long.
func nearLimit(prefix string) json.RawMessage {
	return json.RawMessage(prefix + strings.Repeat("x", DefaultLimits.MaxToolSchemaBytes-len(prefix)-2) + `"}`)
}

func TestCheckOutput(t *testing.T) {
	weather := DynamicTool{Name: "w", OutputSchema: json.RawMessage(
		`{"type":"object","properties":{"temp_c":{"type":"number"}},"required":["temp_c"],"$defs":{"unused":{}}}`)}
	text := DynamicTool{Name: "t", OutputSchema: json.RawMessage(`{"type":"string","maxLength":5}`)}
	cases := []struct {
		name   string
		tool   DynamicTool
		output string
		want   string // "" means it passes, else a part of the error
	}{
		{"no schema", DynamicTool{Name: "n"}, `"anything"`, ""},
		{"null schema", DynamicTool{Name: "n", OutputSchema: json.RawMessage(`null`)}, `1`, ""},
		{"object ok", weather, `{"temp_c":21.5,"sky":"clear"}`, ""},
		{"missing property", weather, `{"sky":"clear"}`, "missing property 'temp_c'"},
		{"wrong type", weather, `{"temp_c":"warm"}`, "at '/temp_c': got string, want number"},
		{"not an object", weather, `"sunny"`, "got string, want object"},
		{"absent output is null", weather, ``, "got null, want object"},
		{"string ok", text, `"noon"`, ""},
		{"string too long", text, `"midnight"`, "maxLength"},
		{"false refuses all", DynamicTool{Name: "f", OutputSchema: json.RawMessage(`false`)}, `1`, "false schema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.tool.CheckOutput(json.RawMessage(tc.output))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want it to pass, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || strings.Contains(msg, "mem://") || strings.Contains(msg, "jsonschema") {
				t.Fatalf("error %q: want one line naming no schema URL", msg)
			}
		})
	}
}

func TestValidateLabels(t *testing.T) {
	if err := ValidateLabels(map[string]string{"source": "slack", "team.id/x": "42"}, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]string{{"": "x"}, {"a b": "x"}, {"k": strings.Repeat("v", 257)}, {"-k": "x"}} {
		if ValidateLabels(bad, DefaultLimits) == nil {
			t.Errorf("labels %v: want an error", bad)
		}
	}
}

func TestParseContent(t *testing.T) {
	p, err := ParseContent(json.RawMessage(`"hi"`), DefaultLimits)
	if err != nil || len(p) != 1 || p[0].Text != "hi" {
		t.Fatalf("string content: %v %v", p, err)
	}
	p, err = ParseContent(json.RawMessage(`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`), DefaultLimits)
	if err != nil || len(p) != 2 {
		t.Fatalf("parts content: %v %v", p, err)
	}
	for _, bad := range []string{``, `null`, `""`, `"  "`, `[]`, `42`, `[{"type":"tool-call"}]`} {
		if _, err := ParseContent(json.RawMessage(bad), DefaultLimits); err == nil {
			t.Errorf("content %s: want an error", bad)
		}
	}
}

func TestUnresolvedCalls(t *testing.T) {
	h := []Message{
		{Role: RoleUser, Parts: []Part{TextPart("hi")}},
		{Role: RoleAssistant, Parts: []Part{
			{Type: PartToolCall, ToolCallID: "1", ToolName: "a"},
			{Type: PartToolCall, ToolCallID: "2", ToolName: "b"},
			{Type: PartToolCall, ToolCallID: "3", ToolName: "c"},
		}},
		{Role: RoleTool, Parts: []Part{{Type: PartToolResult, ToolCallID: "2"}}},
	}
	got := UnresolvedCalls(h)
	if len(got) != 2 || got[0].ToolCallID != "1" || got[1].ToolCallID != "3" {
		t.Fatalf("got %+v", got)
	}
	res := SyntheticResults(got, "cancelled")
	b, _ := json.Marshal(res[0])
	if string(b) != `{"type":"tool-result","tool_call_id":"1","tool_name":"a","output":"cancelled","is_error":true}` {
		t.Fatalf("synthetic result JSON: %s", b)
	}
}

func TestForModelMergesResultsInCallOrder(t *testing.T) {
	call := func(id string) Part { return Part{Type: PartToolCall, ToolCallID: id} }
	res := func(id string) Part { return Part{Type: PartToolResult, ToolCallID: id} }
	h := []Message{
		{ID: 1, Role: RoleUser},
		{ID: 2, Role: RoleAssistant, Parts: []Part{call("d1"), call("s1"), call("d2")}},
		{ID: 3, Role: RoleTool, Parts: []Part{res("s1")}},
		{ID: 4, Role: RoleTool, Parts: []Part{res("d2"), res("d1")}},
		{ID: 5, Role: RoleAssistant},
	}
	got := ForModel(h)
	if len(got) != 4 || got[2].Role != RoleTool || got[3].ID != 5 {
		t.Fatalf("merged history %+v", got)
	}
	var ids []string
	for _, p := range got[2].Parts {
		ids = append(ids, p.ToolCallID)
	}
	if strings.Join(ids, ",") != "d1,s1,d2" {
		t.Fatalf("result order %v", ids)
	}
	if len(h[2].Parts) != 1 || h[2].Parts[0].ToolCallID != "s1" {
		t.Fatal("ForModel modified its input")
	}
}

// TestNULRefused checks that text holding U+0000 is refused wherever a
// client's text is validated, naming the field: PostgreSQL cannot store it.
func TestNULRefused(t *testing.T) {
	if err := ValidateLabels(map[string]string{"k": "a\x00"}, DefaultLimits); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("label value with NUL: %v", err)
	}
	for raw, field := range map[string]string{
		`"a\u0000"`: "content",
		`[{"type":"text","text":"ok"},{"type":"text","text":"\u0000"}]`: "content[1].text",
	} {
		_, err := ParseContent(json.RawMessage(raw), DefaultLimits)
		if ve, ok := err.(*ValidationError); !ok || ve.Field != field || !strings.Contains(ve.Message, "NUL") {
			t.Errorf("content %s: got %v, want a NUL error on %s", raw, err, field)
		}
	}
	for _, schema := range []string{
		`{"type":"object","description":"a\u0000"}`,
		`{"type":"object","properties":{"a":{"enum":["x","\u0000"]}}}`,
		`{"type":"object","properties":{"\u0000":{}}}`,
	} {
		if err := ValidateObjectSchema(json.RawMessage(schema), DefaultLimits.MaxToolSchemaBytes); err == nil || !strings.Contains(err.Error(), "NUL") {
			t.Errorf("schema %s: got %v, want a NUL error", schema, err)
		}
	}
}

// TestSchemaRefs checks that a schema's $refs must all resolve, in the schema
// itself, and must not loop without going into the value; that recursion
// through properties or items is fine; and that no error names a server path.
func TestSchemaRefs(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, schema string
		want         string // in the error; "" means valid
	}{
		{"self", `{"type":"object","$ref":"#"}`, `$ref cycle at "#"`},
		{"two defs", `{"type":"object","$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`, `$ref cycle at "#/$defs/a"`},
		{"under a property", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}]}}}`, `$ref cycle at "#/$defs/a"`},
		{"two properties", `{"type":"object","properties":{"x":{"$ref":"#/properties/y"},"y":{"$ref":"#/properties/x"}}}`, "$ref cycle at"},
		{"through not and if", `{"type":"object","not":{"if":{"$ref":"#"}}}`, `$ref cycle at "#"`},
		{"through anyOf", `{"type":"object","anyOf":[{"type":"object"},{"$ref":"#/anyOf/1"}]}`, `$ref cycle at "#/anyOf/1"`},
		{"missing pointer", `{"type":"object","properties":{"x":{"$ref":"#/$defs/none"}}}`, `"#/$defs/none" not found`},
		{"missing anchor", `{"type":"object","properties":{"x":{"$ref":"#here"}}}`, `"#here" not found`},
		{"other document", `{"type":"object","properties":{"x":{"$ref":"other.json"}}}`, `external $ref "other.json" is not allowed`},
		{"remote", `{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}`, `external $ref "https://example.com/s.json" is not allowed`},
		{"tree", `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`, ""},
		{"shared def", `{"type":"object","properties":{"a":{"$ref":"#/$defs/p"},"b":{"allOf":[{"$ref":"#/$defs/p"},{"$ref":"#/$defs/p"}]}},"$defs":{"p":{"type":"string"}}}`, ""},
		{"linked list", `{"type":"object","$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}}}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateObjectSchema(json.RawMessage(tc.schema), DefaultLimits.MaxToolSchemaBytes)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %s", err, tc.want)
			}
			if msg := err.Error(); strings.Contains(msg, cwd) || strings.Contains(msg, "file:") || strings.Contains(msg, schemaBase) {
				t.Fatalf("error names a server path or the base URL: %s", msg)
			}
		})
	}
}
