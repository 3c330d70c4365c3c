package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/parleyhq/parley/internal/jsonscan"
)

// decode reads the request body, at most the configured size, into v: one
// JSON value, no unknown fields, nothing after it, nested at most
// jsonscan.MaxDepth deep, no string holding U+0000 (see scanJSON). An
// empty body decodes as {}. Errors are apiErrors that say where the JSON
// went wrong.
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

// scanJSON checks, with jsonscan.Scan, what the decoder accepts but the
// stores cannot keep alike, as the API's errors: tooDeep is nesting deeper
// than jsonscan.MaxDepth, refused a string holding U+0000.
func scanJSON(body []byte) (tooDeep, refused error) {
	deep, nul := jsonscan.Scan(body)
	if deep != nil {
		return &apiError{Status: http.StatusBadRequest, Code: "json_too_deep", Message: deep.Error(),
			Details: map[string]any{"limit": jsonscan.MaxDepth, "field": deep.Field, "line": deep.Line, "column": deep.Column, "offset": deep.Offset}}, nil
	}
	if nul != nil {
		return nil, &apiError{Status: http.StatusBadRequest, Code: "invalid_field", Message: nul.Error(),
			Details: map[string]any{"field": nul.Field}}
	}
	return nil, nil
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
		line, col := jsonscan.Position(body, typ.Offset)
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
	line, col := jsonscan.Position(body, offset)
	msg = strings.TrimPrefix(msg, "json: ")
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_json",
		Message: fmt.Sprintf("malformed JSON at line %d, column %d: %s", line, col, msg),
		Details: map[string]any{"line": line, "column": col, "offset": offset}}
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
