package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ValidationError is bad input: Field names what is wrong (for example
// "dynamic_tools[2].name"), Message says why in words a client can act on.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Limits bounds what a client may declare on a chat.
type Limits struct {
	MaxDynamicTools    int // tools per chat
	MaxToolSchemaBytes int // bytes of one tool's input_schema, and of its output_schema
	MaxLabels          int // labels per chat
	MaxMessageBytes    int // bytes of text in one user message
	MaxTitleBytes      int
	MaxSystemPrompt    int // bytes
	MaxToolGlobs       int // globs in one list (a chat's "tools")
	MaxToolGlobBytes   int // bytes of one glob
}

// DefaultLimits are the limits used when the configuration sets none.
var DefaultLimits = Limits{
	MaxDynamicTools:    64,
	MaxToolSchemaBytes: 16 << 10,
	MaxLabels:          32,
	MaxMessageBytes:    256 << 10,
	MaxTitleBytes:      200,
	MaxSystemPrompt:    64 << 10,
	MaxToolGlobs:       64,
	MaxToolGlobBytes:   128,
}

var (
	toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	labelKeyRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_./-]{0,62}$`)
)

// noNUL is the complaint about text holding U+0000, which is refused
// everywhere: PostgreSQL cannot store it in text or jsonb, and every store
// must keep the same text.
const noNUL = `must not contain the NUL character (\u0000)`

// MaxLabelValueBytes bounds one label value.
const MaxLabelValueBytes = 256

// ValidateLabels checks label keys (1-63 characters of letters, digits, "_",
// ".", "/", "-", starting with a letter or digit) and values (valid UTF-8
// without NUL, at most 256 bytes).
func ValidateLabels(labels map[string]string, lim Limits) error {
	if len(labels) > lim.MaxLabels {
		return invalid("labels", "at most %d labels, got %d", lim.MaxLabels, len(labels))
	}
	for k, v := range labels {
		if !labelKeyRE.MatchString(k) {
			return invalid("labels", "key %q must match %s", k, labelKeyRE)
		}
		if len(v) > MaxLabelValueBytes || !utf8.ValidString(v) {
			return invalid("labels", "value of %q must be valid UTF-8 of at most %d bytes", k, MaxLabelValueBytes)
		}
		if strings.ContainsRune(v, 0) {
			return invalid("labels", "value of %q %s", k, noNUL)
		}
	}
	return nil
}

// ValidateDynamicTools checks client-declared tools: names match
// ^[a-zA-Z0-9_-]{1,64}$, are unique, do not collide with a server-side tool
// (serverTool reports those), input_schema is a valid JSON Schema of an
// object within the size limit, and output_schema, when given, is a valid
// JSON Schema of any value within the same limit (counted on its own).
func ValidateDynamicTools(tools []DynamicTool, serverTool func(name string) bool, lim Limits) error {
	if len(tools) > lim.MaxDynamicTools {
		return invalid("dynamic_tools", "at most %d tools, got %d", lim.MaxDynamicTools, len(tools))
	}
	seen := map[string]int{}
	for i, t := range tools {
		field := fmt.Sprintf("dynamic_tools[%d]", i)
		if !toolNameRE.MatchString(t.Name) {
			return invalid(field+".name", "%q must match %s", t.Name, toolNameRE)
		}
		if j, dup := seen[t.Name]; dup {
			return invalid(field+".name", "%q is already declared at dynamic_tools[%d]", t.Name, j)
		}
		seen[t.Name] = i
		if serverTool != nil && serverTool(t.Name) {
			return invalid(field+".name", "%q is the name of a server-side tool", t.Name)
		}
		if err := ValidateObjectSchema(t.InputSchema, lim.MaxToolSchemaBytes); err != nil {
			return invalid(field+".input_schema", "%s", err)
		}
		if t.HasOutputSchema() {
			if err := ValidateSchema(t.OutputSchema, lim.MaxToolSchemaBytes); err != nil {
				return invalid(field+".output_schema", "%s", err)
			}
		}
	}
	return nil
}

// ValidateObjectSchema checks that raw is a JSON Schema (draft 2020-12 unless
// it says otherwise) that describes an object.
func ValidateObjectSchema(raw json.RawMessage, maxBytes int) error {
	return validateSchema(raw, maxBytes, true)
}

// ValidateSchema checks that raw is a JSON Schema (draft 2020-12 unless it
// says otherwise) of any value: an object, or true or false.
func ValidateSchema(raw json.RawMessage, maxBytes int) error {
	return validateSchema(raw, maxBytes, false)
}

func validateSchema(raw json.RawMessage, maxBytes int, object bool) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return fmt.Errorf("is required")
	}
	if len(raw) > maxBytes {
		return fmt.Errorf("is %d bytes, at most %d allowed", len(raw), maxBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("is not valid JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	switch {
	case object && !ok:
		return fmt.Errorf("must be a JSON object")
	case object && obj["type"] != "object":
		return fmt.Errorf(`must describe an object ("type": "object")`)
	case !ok:
		if _, isBool := doc.(bool); !isBool {
			return fmt.Errorf("must be a JSON object (or true or false)")
		}
	}
	if hasNUL(doc) {
		return fmt.Errorf("%s", noNUL)
	}
	if _, err := CompileSchema(doc); err != nil {
		return fmt.Errorf("is not a valid JSON Schema: %v", err)
	}
	return nil
}

// schemaBase is the URL every schema is compiled under: no file, so no text
// names a server path (the compiler makes a relative name absolute against
// the working directory), and hierarchical, so a relative $ref to another
// document resolves to one, which the loader refuses.
const schemaBase = "mem://input_schema.json"

// CompileSchema compiles a JSON Schema document as jsonschema.UnmarshalJSON
// decodes it: draft 2020-12 unless it says otherwise, self-contained (no
// remote $ref), every $ref resolved, and no cycle of references that never
// goes into the value (validation would fail every value reaching it, so the
// schema is refused up front). Its errors are one line and name places in
// the schema as "#/...", never the base URL; so do the lines of the
// validation errors of the schema it returns, once through SchemaText.
func CompileSchema(doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaBase, doc); err != nil {
		return nil, errors.New(SchemaText(err.Error()))
	}
	sch, err := c.Compile(schemaBase)
	if err != nil {
		return nil, errors.New(SchemaText(err.Error()))
	}
	if loc := refCycle(sch); loc != "" {
		return nil, fmt.Errorf("$ref cycle at %q: its references lead back to it without going into the value, so no value could be validated", loc)
	}
	return sch, nil
}

// SchemaText is text of the schema compiler or validator on one line, with
// the base URL the schema was compiled under left out: "#/$defs/a",
// "other.json".
func SchemaText(text string) string {
	text = strings.ReplaceAll(text, schemaBase+"/", "")
	text = strings.ReplaceAll(text, schemaBase, "")
	return strings.Join(strings.Fields(text), " ")
}

// refCycle returns the location ("#/$defs/a") of a schema that, through
// $ref and the keywords that apply to the same value (allOf, anyOf, oneOf,
// not, if/then/else, dependentSchemas), applies to the value again: the
// validator cannot tell such a loop from progress at compile time and fails
// at every value that reaches it. It returns "" when there is none. Keywords
// that go into the value (properties, items, ...) make progress and break a
// loop.
func refCycle(root *jsonschema.Schema) string {
	const (
		onPath = 1
		done   = 2
	)
	state := map[*jsonschema.Schema]int{}
	reached := map[*jsonschema.Schema]bool{root: true}
	todo := []*jsonschema.Schema{root}
	var visit func(s *jsonschema.Schema) *jsonschema.Schema
	visit = func(s *jsonschema.Schema) *jsonschema.Schema {
		state[s] = onPath
		for _, next := range inPlace(s) {
			switch state[next] {
			case onPath:
				return next
			case 0:
				if loop := visit(next); loop != nil {
					return loop
				}
			}
		}
		state[s] = done
		return nil
	}
	for len(todo) > 0 {
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if state[s] == 0 {
			if loop := visit(s); loop != nil {
				return strings.TrimPrefix(loop.Location, schemaBase)
			}
		}
		for _, next := range append(inPlace(s), intoValue(s)...) {
			if !reached[next] {
				reached[next] = true
				todo = append(todo, next)
			}
		}
	}
	return ""
}

// inPlace lists the schemas s applies to the value s itself validates.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, k := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		out = append(out, s.DependentSchemas[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dependencies)) {
		if d, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			out = append(out, d)
		}
	}
	return slices.DeleteFunc(out, func(s *jsonschema.Schema) bool { return s == nil })
}

// intoValue lists the schemas s applies to parts of its value (members,
// items, property names, decoded content).
func intoValue(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		out = append(out, s.Properties[k])
	}
	for _, p := range s.PatternProperties {
		out = append(out, p)
	}
	out = append(out, s.PrefixItems...)
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	return slices.DeleteFunc(out, func(s *jsonschema.Schema) bool { return s == nil })
}

// CheckOutput checks a result's output against the tool's output_schema:
// nil when the tool declares none or the output satisfies it, else an error
// that says in one line what is wrong.
func (t DynamicTool) CheckOutput(output json.RawMessage) error {
	if !t.HasOutputSchema() {
		return nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.OutputSchema))
	if err != nil {
		return fmt.Errorf("output_schema is not valid JSON: %v", err)
	}
	sch, err := CompileSchema(doc)
	if err != nil {
		return fmt.Errorf("output_schema is not a valid JSON Schema: %v", err)
	}
	if len(bytes.TrimSpace(output)) == 0 {
		output = json.RawMessage("null")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(output))
	if err != nil {
		return fmt.Errorf("output is not valid JSON: %v", err)
	}
	if err := sch.Validate(v); err != nil {
		return errors.New(ValidationMessage(err))
	}
	return nil
}

// maxValidationMessage bounds ValidationMessage.
const maxValidationMessage = 1000

// ValidationMessage turns the validator's multi-line report into one line
// of at most about 1000 bytes: "at '/city': got number, want string; at
// '/n': minimum: got 0, want 1". Schema locations in it read "#/..."
// (SchemaText): whoever reads it learns nothing of the server.
func ValidationMessage(err error) string {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) > 1 {
		lines = lines[1:] // "jsonschema validation failed with '<schema url>'"
	}
	var parts []string
	for _, l := range lines {
		l = strings.TrimPrefix(SchemaText(l), "- ")
		if l != "" {
			parts = append(parts, l)
		}
	}
	msg := strings.Join(parts, "; ")
	if len(msg) > maxValidationMessage {
		msg = strings.ToValidUTF8(msg[:maxValidationMessage], "") + "..." // no rune cut in two
	}
	return msg
}

// hasNUL reports whether a decoded JSON value has U+0000 in a string or a key.
func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		return slices.ContainsFunc(v, hasNUL)
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

// noLoader refuses remote $refs: a client's schema must be self-contained.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed", url)
}

// MaxFileParts bounds the file parts of one user message.
const MaxFileParts = 20

// ParseContent reads a user message's content: a string, or an array of
// text parts and file parts ({"type": "file", "file_id": "file_..."}).
// A file part comes back with its FileID only: the caller resolves it to
// the owner's file. The result has at least one part, and some text or a
// file.
func ParseContent(raw json.RawMessage, lim Limits) ([]Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, invalid("content", "is required")
	}
	var parts []Part
	whole := raw[0] == '"' // a string: errors name "content", not its one part
	if whole {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid("content", "is not a valid JSON string: %v", err)
		}
		parts = []Part{TextPart(s)}
	} else if raw[0] == '[' {
		if err := json.Unmarshal(raw, &parts); err != nil {
			return nil, invalid("content", "must be a string or an array of parts: %v", err)
		}
	} else {
		return nil, invalid("content", "must be a string or an array of parts")
	}
	if len(parts) == 0 {
		return nil, invalid("content", "has no parts")
	}
	size, files := 0, 0
	for i, p := range parts {
		switch p.Type {
		case PartText:
		case PartFile:
			if p.FileID == "" || strings.ContainsRune(p.FileID, 0) || p.URL != "" {
				return nil, invalid(fmt.Sprintf("content[%d].file_id", i), "a file part names an uploaded file: {\"type\": \"file\", \"file_id\": \"file_...\"} (POST /api/v1/files uploads one)")
			}
			if files++; files > MaxFileParts {
				return nil, invalid("content", "has more than %d file parts", MaxFileParts)
			}
			parts[i] = Part{Type: PartFile, FileID: p.FileID}
			continue
		default:
			return nil, invalid(fmt.Sprintf("content[%d].type", i), "a user message holds only %q and %q parts, got %q", PartText, PartFile, p.Type)
		}
		if strings.ContainsRune(p.Text, 0) {
			field := fmt.Sprintf("content[%d].text", i)
			if whole {
				field = "content"
			}
			return nil, invalid(field, "%s", noNUL)
		}
		parts[i] = TextPart(p.Text)
		size += len(p.Text)
	}
	if files == 0 && (size == 0 || strings.TrimSpace(joinText(parts)) == "") {
		return nil, invalid("content", "is empty")
	}
	if size > lim.MaxMessageBytes {
		return nil, invalid("content", "is %d bytes, at most %d allowed", size, lim.MaxMessageBytes)
	}
	return parts, nil
}

func joinText(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
