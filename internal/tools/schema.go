package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/parleyhq/parley/internal/chat"
)

// emptySchema is the schema of a tool declared without one: an object of any
// properties.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// compileSchema compiles a tool's input schema, which must describe a JSON
// object and be self-contained (no remote $ref), with every $ref resolved and
// none in a loop (chat.CompileSchema); its errors name no server path.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("input_schema is not valid JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok || obj["type"] != "object" {
		return nil, errors.New(`input_schema must describe an object ("type": "object")`)
	}
	sch, err := chat.CompileSchema(doc)
	if err != nil {
		return nil, fmt.Errorf("input_schema is not a valid JSON Schema: %w", err)
	}
	return sch, nil
}

// checkArgs returns the call's arguments as they go to the tool ("{}" when the
// model sent none) or, when they are not JSON or fail the schema, a message
// that tells the model what is wrong.
func checkArgs(sch *jsonschema.Schema, args json.RawMessage) (json.RawMessage, string) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, fmt.Sprintf("arguments are not valid JSON: %v", err)
	}
	if err := sch.Validate(v); err != nil {
		return nil, "invalid arguments: " + chat.ValidationMessage(err)
	}
	return args, ""
}

// schemaCache holds compiled schemas of the chats' dynamic tools, keyed by the
// schema text, so a chat's schemas compile once and not at every step.
type schemaCache struct {
	mu      sync.Mutex
	max     int
	schemas map[string]*jsonschema.Schema
}

func newSchemaCache(max int) *schemaCache {
	return &schemaCache{max: max, schemas: map[string]*jsonschema.Schema{}}
}

// get returns the compiled schema of raw. The cache forgets everything when
// it is full: simple, bounded, and a recompile is cheap.
func (c *schemaCache) get(raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = emptySchema
	}
	key := string(raw)
	c.mu.Lock()
	sch, ok := c.schemas[key]
	c.mu.Unlock()
	if ok {
		return sch, nil
	}
	sch, err := compileSchema(raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.schemas) >= c.max {
		clear(c.schemas)
	}
	c.schemas[key] = sch
	c.mu.Unlock()
	return sch, nil
}
