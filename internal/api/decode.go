package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// decode reads the request body, at most the configured size, into v: one
// JSON value, no unknown fields, nothing after it, nested at most
// maxJSONDepth deep, no string holding U+0000 (see scanJSON). An empty body decodes as {}. Errors are apiErrors that say
// where the JSON went wrong.
func (a *api) decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.Limits.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Message: fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit),
				Details: map[string]any{"limit": tooBig.Limit}}
		}
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Message: "could not read the request body: " + err.Error()}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	tooDeep, refused := scanJSON(body)
	if tooDeep != nil {
		return tooDeep
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(body, err)
	}
	if rest := body[dec.InputOffset():]; len(bytes.TrimSpace(rest)) > 0 {
		off := dec.InputOffset() + int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n")))
		return invalidJSON(body, off+1, "unexpected data after the JSON value")
	}
	return refused
}

// maxJSONDepth bounds how deeply a request body's arrays and objects nest.
// The decoder alone would take 10,000 levels, but SQLite refuses stored JSON
// deeper than 1,000 (a tool output or a schema's "default" is stored inside
// a few more levels): one limit, at the API and well below both databases',
// answers the same on every backend.
const maxJSONDepth = 64

// scanJSON checks, in one pass over the raw body, what the decoder accepts
// but the stores cannot keep alike. tooDeep is nesting deeper than
// maxJSONDepth, found before the decoder's own work, and refused a string (a
// value or a key, anywhere in the body, tool outputs and schemas included)
// holding U+0000, which PostgreSQL's text and jsonb cannot hold while SQLite
// can; both name where they are. It checks no syntax: on malformed JSON its
// answers are moot, and the decoder says what is wrong.
func scanJSON(body []byte) (tooDeep, refused error) {
	var path jsonPath
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{', '[':
			if len(path.frames) == maxJSONDepth {
				field := path.String()
				line, col := position(body, int64(i+1))
				msg := fmt.Sprintf("JSON nested deeper than %d levels at line %d, column %d", maxJSONDepth, line, col)
				if field != "" {
					msg += " (in " + field + ")"
				}
				return &apiError{Status: http.StatusBadRequest, Code: "json_too_deep", Message: msg,
					Details: map[string]any{"limit": maxJSONDepth, "field": field, "line": line, "column": col, "offset": i + 1}}, refused
			}
			path.push(body[i] == '{')
		case '}', ']':
			path.pop()
		case ',':
			path.next()
		case '"':
			end, nul := scanString(body, i)
			if end < 0 {
				return nil, refused // unterminated: the decoder says where
			}
			key := path.wantsKey()
			if key {
				var name string
				if json.Unmarshal(body[i:end+1], &name) != nil {
					name = string(body[i+1 : end]) // malformed: the decoder will say so
				}
				path.setKey(name)
			}
			if nul && refused == nil {
				field, what := path.String(), "must not contain"
				if key {
					field, what = path.parent(), "must not have a key containing"
				}
				refused = &apiError{Status: http.StatusBadRequest, Code: "invalid_field",
					Message: fmt.Sprintf(`%s: %s the NUL character (\u0000)`, fieldName(field), what),
					Details: map[string]any{"field": field}}
			}
			i = end
		}
	}
	return nil, refused
}

// scanString returns the index of the quote that closes the string opening
// at body[start], or -1, and whether the string holds an escaped U+0000. A
// raw NUL byte is no JSON: the decoder refuses it.
func scanString(body []byte, start int) (end int, nul bool) {
	for i := start + 1; i < len(body); i++ {
		switch body[i] {
		case '"':
			return i, nul
		case '\\':
			if i+5 < len(body) && body[i+1] == 'u' && string(body[i+2:i+6]) == "0000" {
				nul = true
			}
			i++ // the escaped character; \uXXXX's digits are plain bytes
		}
	}
	return -1, nul
}

// fieldName is how an error message names a field: "the request body" for
// the whole of it.
func fieldName(field string) string {
	if field == "" {
		return "the request body"
	}
	return field
}

// jsonPath follows where a scan is in a JSON document, to name a field the
// way validation errors do: "dynamic_tools[0].input_schema.properties.city".
type jsonPath struct {
	frames []pathFrame
}

// pathFrame is one open object or array.
type pathFrame struct {
	object  bool
	key     string // the object's current member
	index   int    // the array's current element
	wantKey bool   // the object's next string is a key
}

func (p *jsonPath) push(object bool) {
	p.frames = append(p.frames, pathFrame{object: object, wantKey: object})
}

func (p *jsonPath) pop() {
	if len(p.frames) > 0 {
		p.frames = p.frames[:len(p.frames)-1]
	}
}

// next moves past a comma: to the next key of an object, the next element
// of an array.
func (p *jsonPath) next() {
	if len(p.frames) == 0 {
		return
	}
	f := &p.frames[len(p.frames)-1]
	if f.object {
		f.wantKey = true
	} else {
		f.index++
	}
}

func (p *jsonPath) wantsKey() bool {
	return len(p.frames) > 0 && p.frames[len(p.frames)-1].wantKey
}

func (p *jsonPath) setKey(k string) {
	f := &p.frames[len(p.frames)-1]
	f.key, f.wantKey = k, false
}

// plainKey is a key that needs no quoting in a path.
var plainKey = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*$`)

// String names the current value: keys joined with ".", indexes in
// brackets, other keys quoted in brackets; "" for the whole body.
func (p *jsonPath) String() string { return p.name(len(p.frames)) }

// parent names the object or array the current value is in.
func (p *jsonPath) parent() string { return p.name(len(p.frames) - 1) }

func (p *jsonPath) name(n int) string {
	var b strings.Builder
	for _, f := range p.frames[:max(n, 0)] {
		switch {
		case !f.object:
			fmt.Fprintf(&b, "[%d]", f.index)
		case plainKey.MatchString(f.key):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		default:
			fmt.Fprintf(&b, "[%s]", strconv.Quote(f.key))
		}
	}
	return b.String()
}

// jsonError describes a decoding error with its position in body.
func jsonError(body []byte, err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return invalidJSON(body, syn.Offset, syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return invalidJSON(body, int64(len(body)), "unexpected end of JSON input")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return &apiError{Status: http.StatusBadRequest, Code: "invalid_json",
				Message: fmt.Sprintf("the request body must be %s, got %s", jsonKind(typ.Type), typ.Value)}
		}
		line, col := position(body, typ.Offset)
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_field",
			Message: fmt.Sprintf("field %q must be %s, got %s (line %d, column %d)", typ.Field, jsonKind(typ.Type), typ.Value, line, col),
			Details: map[string]any{"field": typ.Field, "line": line, "column": col}}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_field",
			Message: fmt.Sprintf("unknown field %q", name), Details: map[string]any{"field": name}}
	}
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_json", Message: err.Error()}
}

// invalidJSON is a syntax error at offset (bytes read when it was found).
func invalidJSON(body []byte, offset int64, msg string) error {
	line, col := position(body, offset)
	msg = strings.TrimPrefix(msg, "json: ")
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_json",
		Message: fmt.Sprintf("malformed JSON at line %d, column %d: %s", line, col, msg),
		Details: map[string]any{"line": line, "column": col, "offset": offset}}
}

// position turns the count of bytes read before an error into the 1-based
// line and column of the last byte read.
func position(body []byte, offset int64) (line, col int) {
	off := int(min(max(offset, 0), int64(len(body))))
	before := body[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = off - bytes.LastIndexByte(before, '\n') - 1
	if col < 1 {
		col = 1
	}
	return line, col
}

// jsonKind names the JSON a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "a JSON value"
}
