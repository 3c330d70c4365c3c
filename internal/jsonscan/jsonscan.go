// Package jsonscan checks request JSON for what the decoder accepts but
// parley's stores cannot keep alike: nesting deeper than MaxDepth, and
// strings holding U+0000. parley's API and its OpenAI-compatible facade read
// every request body through Scan, each answering in its own error shape.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxDepth bounds how deeply a request's arrays and objects nest. The
// decoder alone would take 10,000 levels, but SQLite refuses stored JSON
// deeper than 1,000 (a tool output or a schema's "default" is stored inside
// a few more levels): one limit, at the API and well below both databases',
// answers the same on every backend. JSON a request carries inside a string
// (a tool call's arguments) is held to it too.
const MaxDepth = 64

// DepthError is JSON nested deeper than MaxDepth.
type DepthError struct {
	Field        string // the value that opens the level too many; "" for the whole document
	Line, Column int    // where, 1-based
	Offset       int    // bytes read up to and including the opening bracket
}

func (e *DepthError) Error() string {
	msg := fmt.Sprintf("JSON nested deeper than %d levels at line %d, column %d", MaxDepth, e.Line, e.Column)
	if e.Field != "" {
		msg += " (in " + e.Field + ")"
	}
	return msg
}

// NULError is a string, or an object's key, holding U+0000, which
// PostgreSQL's text and jsonb cannot hold while SQLite can.
type NULError struct {
	Field string // the string's field, or the object whose key it is; "" for the whole document
	InKey bool   // the NUL is in a key of Field
}

func (e *NULError) Error() string {
	what := "must not contain"
	if e.InKey {
		what = "must not have a key containing"
	}
	return fmt.Sprintf(`%s: %s the NUL character (\u0000)`, FieldName(e.Field), what)
}

// FieldName is how an error message names a field: "the request body" for
// the whole of it.
func FieldName(field string) string {
	if field == "" {
		return "the request body"
	}
	return field
}

// Scan checks, in one pass over raw JSON, its nesting and its strings (values
// and keys, anywhere in it): tooDeep is the first level deeper than
// MaxDepth, found before a decoder's own work, and nul the first string
// holding U+0000; both name where they are. It checks no syntax: on
// malformed JSON its answers are moot, and the decoder says what is wrong.
func Scan(doc []byte) (tooDeep *DepthError, nul *NULError) {
	var path jsonPath
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '{', '[':
			if len(path.frames) == MaxDepth {
				line, col := Position(doc, int64(i+1))
				return &DepthError{Field: path.String(), Line: line, Column: col, Offset: i + 1}, nul
			}
			path.push(doc[i] == '{')
		case '}', ']':
			path.pop()
		case ',':
			path.next()
		case '"':
			end, hasNUL := scanString(doc, i)
			if end < 0 {
				return nil, nul // unterminated: the decoder says where
			}
			key := path.wantsKey()
			if key {
				var name string
				if json.Unmarshal(doc[i:end+1], &name) != nil {
					name = string(doc[i+1 : end]) // malformed: the decoder will say so
				}
				path.setKey(name)
			}
			if hasNUL && nul == nil {
				nul = &NULError{Field: path.String()}
				if key {
					nul = &NULError{Field: path.parent(), InKey: true}
				}
			}
			i = end
		}
	}
	return nil, nul
}

// scanString returns the index of the quote that closes the string opening
// at doc[start], or -1, and whether the string holds an escaped U+0000. A
// raw NUL byte is no JSON: the decoder refuses it.
func scanString(doc []byte, start int) (end int, nul bool) {
	for i := start + 1; i < len(doc); i++ {
		switch doc[i] {
		case '"':
			return i, nul
		case '\\':
			if i+5 < len(doc) && doc[i+1] == 'u' && string(doc[i+2:i+6]) == "0000" {
				nul = true
			}
			i++ // the escaped character; \uXXXX's digits are plain bytes
		}
	}
	return -1, nul
}

// Position turns the count of bytes read before an error into the 1-based
// line and column of the last byte read.
func Position(doc []byte, offset int64) (line, col int) {
	off := int(min(max(offset, 0), int64(len(doc))))
	before := doc[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = off - bytes.LastIndexByte(before, '\n') - 1
	if col < 1 {
		col = 1
	}
	return line, col
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
// brackets, other keys quoted in brackets; "" for the whole document.
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

// Depth returns how deeply doc nests its arrays and objects (0 for a
// scalar), without decoding it: brackets inside strings do not count.
func Depth(doc []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		case '"':
			end, _ := scanString(doc, i)
			if end < 0 {
				return deepest
			}
			i = end
		}
	}
	return deepest
}

// ReplaceNUL returns doc with every U+0000 in its strings and keys written
// as U+FFFD instead, and doc itself when it holds none: for JSON that must
// be stored, not refused (what a model or a tool produced).
func ReplaceNUL(doc []byte) []byte {
	if !bytes.Contains(doc, []byte(`\u0000`)) {
		return doc
	}
	out := make([]byte, 0, len(doc))
	for i := 0; i < len(doc); i++ {
		if doc[i] != '"' {
			out = append(out, doc[i])
			continue
		}
		end, _ := scanString(doc, i)
		if end < 0 {
			return append(out, doc[i:]...)
		}
		for j := i; j <= end; j++ {
			if doc[j] == '\\' && bytes.HasPrefix(doc[j:], []byte(`\u0000`)) {
				out = append(out, `\ufffd`...)
				j += len(`\u0000`) - 1
				continue
			}
			if doc[j] == '\\' {
				out = append(out, doc[j], doc[j+1])
				j++
				continue
			}
			out = append(out, doc[j])
		}
		i = end
	}
	return out
}
