package chat

import (
	"encoding/json"
	"fmt"
)

// Response format types (ResponseFormat.Type).
const (
	FormatJSONSchema = "json_schema" // the answer is JSON valid against a schema
	FormatText       = "text"        // free text: no format
)

// PartOutputRepair is a request parley makes of the model after a final
// answer that was not valid against the turn's format: a user message
// whose only part quotes what was wrong and asks for the JSON alone. The
// model sees its Text as the user's; clients and counts tell it from the
// person's messages by its type.
const PartOutputRepair = "output-repair"

// Check reports what is wrong with the response format, naming the field
// under prefix ("response_format"): a type of "json_schema", with a valid
// json_schema (OutputFormat.Check), or of "text", with none.
func (f *ResponseFormat) Check(prefix string) error {
	switch f.Type {
	case FormatJSONSchema:
		return f.JSONSchema.Check(prefix + ".json_schema")
	case FormatText:
		if len(f.JSONSchema.Schema) > 0 || f.JSONSchema.Name != "" {
			return invalid(prefix+".json_schema", "must be absent when type is %q", FormatText)
		}
		return nil
	case "":
		return invalid(prefix+".type", "is required: %q or %q", FormatJSONSchema, FormatText)
	}
	return invalid(prefix+".type", "%q is not supported: use %q or %q", f.Type, FormatJSONSchema, FormatText)
}

// MarshalJSON writes a text format as {"type": "text"} alone.
func (f ResponseFormat) MarshalJSON() ([]byte, error) {
	if f.Type != FormatJSONSchema {
		return json.Marshal(struct {
			Type string `json:"type"`
		}{f.Type})
	}
	type plain ResponseFormat
	return json.Marshal(plain(f))
}

// Output returns the format the response format asks for; nil for free
// text (or a nil f).
func (f *ResponseFormat) Output() *OutputFormat {
	if f == nil || f.Type != FormatJSONSchema {
		return nil
	}
	return &f.JSONSchema
}

// TurnOutput returns the format the chat's turn in progress answers in:
// the one the message that started the turn asked for, else the chat's;
// nil for free text.
func (c Chat) TurnOutput() *OutputFormat {
	if c.TurnFormat != nil {
		return c.TurnFormat.Output()
	}
	return c.ResponseFormat.Output()
}

// RepairRequest is the part of the user message that asks the model to
// answer again in format f, quoting why its answer was not valid.
func RepairRequest(f OutputFormat, why error) Part {
	return Part{Type: PartOutputRepair, Text: fmt.Sprintf(
		"Your answer does not match the required output format %q: %v\n"+
			"Answer again with only a JSON value valid against that schema: no prose, no code fence.", f.Name, why)}
}

// IsRepair reports whether m is a request parley made of the model to
// repair its answer (PartOutputRepair), not a person's message.
func IsRepair(m Message) bool {
	return m.Role == RoleUser && len(m.Parts) > 0 && m.Parts[0].Type == PartOutputRepair
}

// OutputOf returns the structured output of message m (its PartOutput's
// JSON); nil if it has none.
func OutputOf(m Message) json.RawMessage {
	for _, p := range m.Parts {
		if p.Type == PartOutput {
			return p.JSON
		}
	}
	return nil
}

// LastOutput returns the structured output of the last assistant message
// of msgs (a chat's last turn, LastTurn); nil if it has none.
func LastOutput(msgs []Message) json.RawMessage {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant && !IsCompaction(msgs[i]) {
			return OutputOf(msgs[i])
		}
	}
	return nil
}

// AnswerText returns the text of an answer: its text parts, joined.
func AnswerText(m Message) string {
	var s string
	for _, p := range m.Parts {
		if p.Type == PartText {
			s += p.Text
		}
	}
	return s
}

// forModelParts returns m as the model sees its parts: a repair request
// as text, and without structured outputs (the text says the same). m is
// not modified.
func forModelParts(m Message) Message {
	touched := false
	for _, p := range m.Parts {
		if p.Type == PartOutput || p.Type == PartOutputRepair {
			touched = true
		}
	}
	if !touched {
		return m
	}
	parts := make([]Part, 0, len(m.Parts))
	for _, p := range m.Parts {
		switch p.Type {
		case PartOutput:
			continue
		case PartOutputRepair:
			p = TextPart(p.Text)
		}
		parts = append(parts, p)
	}
	m.Parts = parts
	return m
}
