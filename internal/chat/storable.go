package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// MaxStoredDepth bounds how deeply the JSON that a model or a tool produces
// (call arguments, outputs) may nest to be stored as it is. SQLite refuses
// JSON nested deeper than 1,000 levels, and a part wraps its JSON in a few
// more; PostgreSQL takes more, but both must store the same history.
const MaxStoredDepth = 512

// MakeStorable makes what a model or a tool produced storable on every
// database, in place, changing nothing that is already: U+0000, which
// PostgreSQL's text and jsonb cannot hold, becomes U+FFFD in text and in
// JSON strings; call arguments nested deeper than MaxStoredDepth become {}
// (the dispatcher refuses such a call, so it never runs with them); an
// output nested that deep becomes an error saying so. Input a client sends
// is refused instead, before it gets here.
func MakeStorable(m *Message) {
	for i := range m.Parts {
		p := &m.Parts[i]
		p.Text, p.ToolCallID, p.ToolName = withoutNUL(p.Text), withoutNUL(p.ToolCallID), withoutNUL(p.ToolName)
		if JSONDepth(p.Args) > MaxStoredDepth {
			p.Args = json.RawMessage(`{}`)
		}
		p.Args = jsonNoNUL(p.Args)
		if JSONDepth(p.Output) > MaxStoredDepth {
			p.Output, _ = json.Marshal(fmt.Sprintf("the output was nested deeper than %d levels and was not kept", MaxStoredDepth))
			p.IsError = true
		}
		p.Output = jsonNoNUL(p.Output)
	}
}

// StorableError returns e with U+0000 replaced in its text (a provider's
// message may hold anything).
func StorableError(e *ChatError) *ChatError {
	if e == nil {
		return nil
	}
	c := *e
	c.Message, c.Provider, c.Source = withoutNUL(c.Message), withoutNUL(c.Provider), withoutNUL(c.Source)
	return &c
}

// JSONDepth returns how deeply the JSON text raw nests its arrays and
// objects (0 for a scalar), without decoding it: brackets inside strings do
// not count.
func JSONDepth(raw []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case inString && c == '\\':
			i++ // the escaped byte cannot end the string
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

func withoutNUL(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }

// jsonNoNUL replaces U+0000 in the strings (and keys) of the JSON text
// raw; raw is returned as it is when it holds none.
func jsonNoNUL(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`\u0000`)) {
		return raw
	}
	var out bytes.Buffer
	out.Grow(len(raw))
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString && c == '\\' && bytes.HasPrefix(raw[i:], []byte(`\u0000`)):
			out.WriteString(`\ufffd`)
			i += len(`\u0000`) - 1
			continue
		case inString && c == '\\' && i+1 < len(raw):
			out.WriteByte(c)
			out.WriteByte(raw[i+1])
			i++
			continue
		case c == '"':
			inString = !inString
		}
		out.WriteByte(c)
	}
	return out.Bytes()
}
