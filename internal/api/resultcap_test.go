package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
)

// TestToolResultsOverTheCapStoredTruncated posts client results larger than
// tools.max_result_bytes: they are checked whole against the tool's
// output_schema, then stored cut, with the marker the model sees and the
// full size on the part, as GET /messages shows them. A small result is
// stored as posted.
func TestToolResultsOverTheCapStoredTruncated(t *testing.T) {
	s := newSQLite(t, func(su *setup) { su.cfg.Tools.MaxResultBytes = 1000 })
	tok := s.token("alice")
	c := waitingWith(s, tok, []map[string]any{
		{"name": "get_weather", "description": "w", "input_schema": map[string]any{"type": "object"},
			"output_schema": map[string]any{"type": "object", "required": []string{"temp_c"}}},
		{"name": "get_time", "description": "t", "input_schema": map[string]any{"type": "object"}},
	})
	note := strings.Repeat("ü", 2000) // 2 bytes each: the cap falls inside one
	body := map[string]any{"results": []map[string]any{
		{"tool_call_id": "d1", "output": map[string]any{"temp_c": 21, "note": note}},
		{"tool_call_id": "d2", "output": "noon"},
	}}
	s.do("POST", "/api/v1/chats/"+c.ID+"/tool-results", tok, body).expect(t, http.StatusOK, nil)

	res := s.do("GET", "/api/v1/chats/"+c.ID+"/messages", tok, nil)
	var raw struct {
		Messages []struct {
			Parts []map[string]json.RawMessage `json:"parts"`
		} `json:"messages"`
	}
	res.expect(t, http.StatusOK, &raw)
	parts := raw.Messages[len(raw.Messages)-1].Parts
	if len(parts) != 2 {
		t.Fatalf("last message has %d parts, want the 2 results", len(parts))
	}
	full, _ := json.Marshal(map[string]any{"temp_c": 21, "note": note})
	var d1 string
	if err := json.Unmarshal(parts[0]["output"], &d1); err != nil {
		t.Fatalf("d1's output is not a string: %s", parts[0]["output"])
	}
	want := string(full[:999]) + "\n[… truncated: 4,023 bytes, showing the first 999]"
	if len(full) != 4023 || d1 != want {
		t.Fatalf("d1's output (of %d bytes) is %q, want %q", len(full), d1, want)
	}
	if string(parts[0]["output_bytes"]) != "4023" || string(parts[0]["truncated"]) != "true" || string(parts[0]["is_error"]) != "false" {
		t.Fatalf("d1: output_bytes %s, truncated %s, is_error %s", parts[0]["output_bytes"], parts[0]["truncated"], parts[0]["is_error"])
	}
	if string(parts[1]["output"]) != `"noon"` || parts[1]["output_bytes"] != nil || parts[1]["truncated"] != nil {
		t.Fatalf("d2 changed: %v", parts[1])
	}
	// The typed view agrees.
	msgs := s.messages(tok, c.ID)
	if p := msgs[len(msgs)-1].Parts[0]; p.Type != chat.PartToolResult || !p.Truncated || p.OutputBytes != 4023 {
		t.Fatalf("d1 read back as %+v", p)
	}
}
