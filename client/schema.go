package client

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"
)

// schemaOf derives the JSON Schema of a tool's input type t, which must be
// an object: a struct (or a pointer to one), or a map. Field names and
// required fields follow the json tags (fields without omitempty are
// required); `jsonschema:"description=..."` tags describe fields. Nested
// named structs go to "$defs", so recursive types work.
func schemaOf(t reflect.Type) (json.RawMessage, error) {
	r := jsonschema.Reflector{Anonymous: true, ExpandedStruct: true}
	s := r.ReflectFromType(t)
	s.Version = "" // the server's default draft (2020-12) applies
	if s.Type != "object" {
		return nil, fmt.Errorf("input type %s is not a JSON object (its schema type is %q): use a struct", t, s.Type)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode the schema of %s: %w", t, err)
	}
	return b, nil
}
