package chat

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/jsonscan"
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
		if jsonscan.Depth(p.Args) > MaxStoredDepth {
			p.Args = json.RawMessage(`{}`)
		}
		p.Args = jsonscan.ReplaceNUL(p.Args)
		if jsonscan.Depth(p.Output) > MaxStoredDepth {
			p.Output, _ = json.Marshal(fmt.Sprintf("the output was nested deeper than %d levels and was not kept", MaxStoredDepth))
			p.IsError = true
		}
		p.Output = jsonscan.ReplaceNUL(p.Output)
		p.JSON = jsonscan.ReplaceNUL(p.JSON)
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

func withoutNUL(s string) string { return StorableText(s) }

// StorableText returns s storable as text on every database: U+0000,
// which PostgreSQL's text cannot hold, and bytes that are not UTF-8,
// which it refuses, become U+FFFD; s is returned as it is when it has
// neither. Every string parley stores from outside (a model's or a
// tool's output, a provider's error, a webhook receiver's answer) passes
// through it; what a client sends is refused instead.
func StorableText(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
