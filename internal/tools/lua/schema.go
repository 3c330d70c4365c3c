package lua

import (
	"encoding/json"
	"fmt"

	glua "github.com/yuin/gopher-lua"
)

// arrayKeywords are the JSON Schema keywords whose value is an array, so an
// empty Lua table there means [] rather than {}.
var arrayKeywords = map[string]bool{
	"required": true, "enum": true, "type": true, "examples": true,
	"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true,
}

// schemaMaps are the keywords whose value maps names to subschemas.
var schemaMaps = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}

// schemaOne are the keywords whose value is one subschema.
var schemaOne = []string{"items", "additionalProperties", "not", "if", "then", "else", "contains",
	"propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems"}

// schemaLists are the keywords whose value is a list of subschemas.
var schemaLists = []string{"allOf", "anyOf", "oneOf", "prefixItems"}

// inputSchema converts a tool's input_schema table to JSON Schema. Tables
// convert like any value (see toGo), with two additions: an empty table
// under an array-valued keyword (required, enum, type, examples, allOf,
// anyOf, oneOf, prefixItems) becomes [], and a schema without "type" gets
// "type": "object". A nil schema is an object of any properties.
func (k *jsonKinds) inputSchema(v glua.LValue) (json.RawMessage, error) {
	if v == glua.LNil {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	if _, ok := v.(*glua.LTable); !ok {
		return nil, fmt.Errorf("input_schema must be a table, not a %s", v.Type())
	}
	g, err := k.toGo(v)
	if err != nil {
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	root, ok := g.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("input_schema must be a table of keywords (like {type = \"object\", properties = {...}}), not a list")
	}
	fixSchema(root)
	if _, ok := root["type"]; !ok {
		root["type"] = "object"
	}
	b, jerr := json.Marshal(root)
	if jerr != nil {
		return nil, fmt.Errorf("input_schema: %v", jerr)
	}
	return b, nil
}

// fixSchema turns empty objects under array-valued keywords into empty
// arrays, in s and every subschema it holds.
func fixSchema(s map[string]any) {
	for key, v := range s {
		if m, ok := v.(map[string]any); ok && len(m) == 0 && arrayKeywords[key] {
			s[key] = []any{}
		}
	}
	for _, key := range schemaMaps {
		if m, ok := s[key].(map[string]any); ok {
			for _, sub := range m {
				if sm, ok := sub.(map[string]any); ok {
					fixSchema(sm)
				}
			}
		}
	}
	for _, key := range schemaOne {
		if sm, ok := s[key].(map[string]any); ok {
			fixSchema(sm)
		}
	}
	for _, key := range schemaLists {
		if l, ok := s[key].([]any); ok {
			for _, sub := range l {
				if sm, ok := sub.(map[string]any); ok {
					fixSchema(sm)
				}
			}
		}
	}
}
