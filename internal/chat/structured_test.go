package chat

import (
	"encoding/json"
	"errors"
	"testing"
)

var totalSchema = json.RawMessage(`{"type":"object","properties":{"total":{"type":"number"}},"required":["total"]}`)

func TestResponseFormatCheck(t *testing.T) {
	cases := []struct {
		name  string
		f     ResponseFormat
		field string // "" for valid
	}{
		{"json_schema", ResponseFormat{Type: FormatJSONSchema, JSONSchema: OutputFormat{Name: "total", Schema: totalSchema}}, ""},
		{"text", ResponseFormat{Type: FormatText}, ""},
		{"no type", ResponseFormat{}, "response_format.type"},
		{"json_object", ResponseFormat{Type: "json_object"}, "response_format.type"},
		{"text with a schema", ResponseFormat{Type: FormatText, JSONSchema: OutputFormat{Schema: totalSchema}}, "response_format.json_schema"},
		{"a bad name", ResponseFormat{Type: FormatJSONSchema, JSONSchema: OutputFormat{Name: "a b", Schema: totalSchema}}, "response_format.json_schema.name"},
		{"an array schema", ResponseFormat{Type: FormatJSONSchema, JSONSchema: OutputFormat{Schema: json.RawMessage(`{"type":"array"}`)}}, "response_format.json_schema.schema"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.f.Check("response_format")
			var ve *ValidationError
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.field != "" && (!errors.As(err, &ve) || ve.Field != c.field):
				t.Fatalf("err = %v, want one naming %s", err, c.field)
			}
		})
	}
	f := ResponseFormat{Type: FormatJSONSchema, JSONSchema: OutputFormat{Schema: totalSchema}}
	if err := f.Check("response_format"); err != nil || f.JSONSchema.Name != "output" {
		t.Fatalf("a format without a name: %v, name %q; want \"output\"", err, f.JSONSchema.Name)
	}
}

func TestTurnOutput(t *testing.T) {
	chatFormat := &ResponseFormat{Type: FormatJSONSchema, JSONSchema: OutputFormat{Name: "chat", Schema: totalSchema}}
	turnFormat := &ResponseFormat{Type: FormatJSONSchema, JSONSchema: OutputFormat{Name: "turn", Schema: totalSchema}}
	cases := []struct {
		name       string
		chat, turn *ResponseFormat
		want       string // the name; "" for free text
	}{
		{"none", nil, nil, ""},
		{"the chat's", chatFormat, nil, "chat"},
		{"the turn's over the chat's", chatFormat, turnFormat, "turn"},
		{"the turn's alone", nil, turnFormat, "turn"},
		{"a text turn in a formatted chat", chatFormat, &ResponseFormat{Type: FormatText}, ""},
	}
	for _, c := range cases {
		got := Chat{ResponseFormat: c.chat, TurnFormat: c.turn}.TurnOutput()
		if (got == nil && c.want != "") || (got != nil && got.Name != c.want) {
			t.Errorf("%s: TurnOutput = %+v, want %q", c.name, got, c.want)
		}
	}
}

// TestModelSeesRepairAsText: the model reads a repair request as the
// user's text, and never an output part; the history is not changed.
func TestModelSeesRepairAsText(t *testing.T) {
	repair := RepairRequest(OutputFormat{Name: "total"}, errors.New("the answer is not valid JSON"))
	history := []Message{
		{ID: 1, Role: RoleUser, Parts: []Part{TextPart("1+2?")}},
		{ID: 2, Role: RoleAssistant, Parts: []Part{TextPart("three")}},
		{ID: 3, Role: RoleUser, Parts: []Part{repair}},
		{ID: 4, Role: RoleAssistant, Parts: []Part{TextPart(`{"total":3}`), {Type: PartOutput, JSON: json.RawMessage(`{"total":3}`)}}},
	}
	if !IsRepair(history[2]) || IsRepair(history[0]) {
		t.Fatal("IsRepair does not tell the repair request from the person's message")
	}
	view := ForModel(history)
	if len(view) != 4 || view[2].Parts[0].Type != PartText || view[2].Parts[0].Text != repair.Text {
		t.Fatalf("the model sees the repair as %+v", view[2])
	}
	if len(view[3].Parts) != 1 || view[3].Parts[0].Type != PartText {
		t.Fatalf("the model sees the answer as %+v; want its text alone", view[3])
	}
	if history[2].Parts[0].Type != PartOutputRepair || len(history[3].Parts) != 2 {
		t.Fatal("ForModel changed the history")
	}
	if string(LastOutput(history)) != `{"total":3}` || LastOutput(history[:3]) != nil {
		t.Fatal("LastOutput reads the wrong answer")
	}
	// A compaction never cuts at a repair request: it is part of its turn.
	if cut := CompactionCut(history, 0); cut != 0 {
		t.Fatalf("CompactionCut = %d, want 0 (one turn)", cut)
	}
}

func TestResponseFormatJSON(t *testing.T) {
	b, err := json.Marshal(ResponseFormat{Type: FormatText})
	if err != nil || string(b) != `{"type":"text"}` {
		t.Fatalf("text format = %s, %v", b, err)
	}
	b, err = json.Marshal(ResponseFormat{Type: FormatJSONSchema, JSONSchema: OutputFormat{Name: "t", Schema: totalSchema, Strict: true}})
	if err != nil || string(b) != `{"type":"json_schema","json_schema":{"name":"t","schema":`+string(totalSchema)+`,"strict":true}}` {
		t.Fatalf("json_schema format = %s, %v", b, err)
	}
}
