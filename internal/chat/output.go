package chat

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// DefaultMaxOutputBytes is the cap on a tool result's text when none is
// configured: 64 KiB, about 16k tokens.
const DefaultMaxOutputBytes = 64 << 10

// CapOutput returns the tool-result part p with its output cut to at most
// max bytes of text (max <= 0 means DefaultMaxOutputBytes), so one huge
// result cannot fill the history and every later model request. The text
// is a string output's value, or else the output's JSON. A longer text is
// cut at a UTF-8 boundary and followed by a marker the model sees, such as
// "\n[… truncated: 10,485,760 bytes, showing the first 65,536]"; the output
// becomes that string, also when it was other JSON, since cut JSON would not
// parse. OutputBytes keeps the full length and Truncated says it was cut.
// Other parts, and results already cut, are returned as they are.
func (p Part) CapOutput(max int) Part {
	if max <= 0 {
		max = DefaultMaxOutputBytes
	}
	if p.Type != PartToolResult || p.Truncated || len(p.Output) <= max {
		return p
	}
	text := string(p.Output)
	if trimmed := bytes.TrimLeft(p.Output, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '"' {
		var s string
		if json.Unmarshal(p.Output, &s) == nil {
			text = s
		}
	}
	if len(text) <= max { // escapes made the JSON longer than its text
		return p
	}
	cut := max
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(text[cut]); i++ {
		cut--
	}
	p.Output = jsonString(text[:cut] + "\n[… truncated: " + grouped(len(text)) + " bytes, showing the first " + grouped(cut) + "]")
	p.OutputBytes = int64(len(text))
	p.Truncated = true
	return p
}

// jsonString encodes s as a JSON string, leaving <, > and & as they are:
// the output is read by a model, not embedded in HTML. Bytes that are not
// UTF-8 become U+FFFD.
func jsonString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// grouped writes n with commas between groups of three digits: 65,536.
func grouped(n int) string {
	s := strconv.Itoa(n)
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}
