package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxOutputSchemaBytes bounds an output format's schema.
const MaxOutputSchemaBytes = 64 << 10

// OutputFormat asks for a turn's final answer as JSON valid against a
// schema (structured output). Its JSON form is OpenAI's json_schema
// response format without the envelope: {"name", "schema", "strict"}.
type OutputFormat struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict,omitempty"`
}

// ResponseFormat is OpenAI's response_format envelope as the API takes and
// shows it: {"type": "json_schema", "json_schema": {...}}.
type ResponseFormat struct {
	Type       string       `json:"type"` // "json_schema"
	JSONSchema OutputFormat `json:"json_schema"`
}

// formatName is what a format's name may be (OpenAI's rule for it).
var formatName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Check reports what is wrong with the format, naming the field under
// prefix ("response_format.json_schema", "output_schema"): a name of at most
// 64 letters, digits, '_' or '-' (empty becomes "output"), and a schema of
// an object, at most MaxOutputSchemaBytes, self-contained.
func (f *OutputFormat) Check(prefix string) error {
	if f.Name == "" {
		f.Name = "output"
	}
	if !formatName.MatchString(f.Name) {
		return invalid(prefix+".name", "must be 1 to 64 letters, digits, '_' or '-'")
	}
	if err := ValidateObjectSchema(f.Schema, MaxOutputSchemaBytes); err != nil {
		return invalid(prefix+".schema", "%v", err)
	}
	return nil
}

// Parse reads a final answer against the format: the JSON value (the text
// may be fenced in ```json ... ``` or surrounded by blanks), or an error
// that says in one line what is wrong, for the model to repair.
func (f OutputFormat) Parse(answer string) (json.RawMessage, error) {
	text := strings.TrimSpace(answer)
	if s, ok := strings.CutPrefix(text, "```"); ok {
		s = strings.TrimPrefix(s, "json")
		if body, ok := strings.CutSuffix(strings.TrimSpace(s), "```"); ok {
			text = strings.TrimSpace(body)
		}
	}
	if text == "" {
		return nil, errors.New("the answer is empty, not JSON")
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("the answer is not valid JSON: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(f.Schema))
	if err != nil {
		return nil, fmt.Errorf("the schema is not valid JSON: %v", err)
	}
	sch, err := CompileSchema(doc)
	if err != nil {
		return nil, fmt.Errorf("the schema is not valid: %v", err)
	}
	if err := sch.Validate(v); err != nil {
		return nil, errors.New(ValidationMessage(err))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(text)); err != nil {
		return nil, fmt.Errorf("the answer is not valid JSON: %v", err)
	}
	return compact.Bytes(), nil
}
