package tools

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
)

// namesServer reports whether text names the server's files: its working
// directory or a file URL.
func namesServer(t *testing.T, text string) bool {
	t.Helper()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(text, cwd) || strings.Contains(text, "file:")
}

// TestSchemaTextsNameNoServerPath checks what the model is told about a
// dynamic tool's schema and arguments, and what a server tool's bad schema
// is refused with: schema places as "#/...", never a path of the server.
func TestSchemaTextsNameNoServerPath(t *testing.T) {
	loop := chat.DynamicTool{Name: "loop", InputSchema: json.RawMessage(`{"type":"object","$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}`)}
	typed := chat.DynamicTool{Name: "typed", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"integer"}}}`)}
	d := NewDispatcher(newRegistry(t, nil), Options{}, discard())
	out := d.Run(context.Background(), Step{
		Calls: []chat.ToolCall{
			{ToolCallID: "c1", ToolName: "loop", Args: json.RawMessage(`{}`)},
			{ToolCallID: "c2", ToolName: "typed", Args: json.RawMessage(`{"n":"one"}`)},
		},
		Dynamic: []chat.DynamicTool{loop, typed},
	})
	for id, want := range map[string]string{
		"c1": `cannot be called: input_schema is not a valid JSON Schema: $ref cycle at "#/$defs/a"`,
		"c2": "at '/n': got string, want integer",
	} {
		msg := errorText(t, resultByID(t, out.Results, id))
		if !strings.Contains(msg, want) || namesServer(t, msg) {
			t.Errorf("%s: message %q, want one with %q that names no server path", id, msg, want)
		}
	}

	for _, schema := range []string{
		`{"type":"object","properties":{"x":{"$ref":"#/$defs/none"}}}`,
		`{"type":"object","properties":{"x":{"$ref":"other.json"}}}`,
		`{"type":"object","allOf":[{"$ref":"#"}]}`,
	} {
		_, err := compileSchema(json.RawMessage(schema))
		if err == nil || namesServer(t, err.Error()) {
			t.Errorf("schema %s: got %v, want an error that names no server path", schema, err)
		}
	}
}
