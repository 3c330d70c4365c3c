package chat

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func bigResult(output string) Part {
	return Part{Type: PartToolResult, ToolCallID: "c1", ToolName: "big", Output: json.RawMessage(output)}
}

// outputText decodes a capped output, which must be a JSON string of valid
// UTF-8.
func outputText(t *testing.T, p Part) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(p.Output, &s); err != nil {
		t.Fatalf("output is not a JSON string: %v", err)
	}
	if !utf8.ValidString(s) {
		t.Fatal("output is not valid UTF-8")
	}
	return s
}

func TestCapOutputText(t *testing.T) {
	text := strings.Repeat("x", 10<<20)
	raw, _ := json.Marshal(text)
	p := bigResult(string(raw)).CapOutput(64 << 10)
	got := outputText(t, p)
	want := strings.Repeat("x", 64<<10) + "\n[… truncated: 10,485,760 bytes, showing the first 65,536]"
	if got != want {
		t.Fatalf("output is %d bytes ending %q, want %d bytes ending %q", len(got), got[max(0, len(got)-80):], len(want), want[max(0, len(want)-80):])
	}
	if !p.Truncated || p.OutputBytes != 10<<20 {
		t.Fatalf("truncated %v, output_bytes %d; want true, %d", p.Truncated, p.OutputBytes, 10<<20)
	}
	if p.Type != PartToolResult || p.ToolCallID != "c1" || p.ToolName != "big" || p.IsError {
		t.Fatalf("the part's other fields changed: %+v", p)
	}
}

func TestCapOutputCutsAtRuneBoundary(t *testing.T) {
	for _, tc := range []struct {
		name     string
		text     string
		max      int
		wantShow int
	}{
		{"two-byte runes, cut inside one", strings.Repeat("é", 100), 11, 10},
		{"two-byte runes, cut between", strings.Repeat("é", 100), 10, 10},
		{"four-byte runes, cut after the first byte", strings.Repeat("😀", 50), 9, 8},
		{"four-byte runes, cut before the last byte", strings.Repeat("😀", 50), 11, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := json.Marshal(tc.text)
			p := bigResult(string(raw)).CapOutput(tc.max)
			got := outputText(t, p)
			shown, marker, ok := strings.Cut(got, "\n[… truncated: ")
			if !ok || shown != tc.text[:tc.wantShow] {
				t.Fatalf("shows %q, want %q", shown, tc.text[:tc.wantShow])
			}
			if want := grouped(len(tc.text)) + " bytes, showing the first " + grouped(tc.wantShow) + "]"; marker != want {
				t.Fatalf("marker %q, want %q", marker, want)
			}
		})
	}
}

func TestCapOutputJSONBecomesString(t *testing.T) {
	items := make([]string, 5000)
	for i := range items {
		items[i] = `{"id": ` + strconv.Itoa(i) + `, "name": "<item>"}`
	}
	raw := []byte(`{"items": [` + strings.Join(items, ", ") + `]}`)
	p := bigResult(string(raw)).CapOutput(1000)
	got := outputText(t, p)
	want := string(raw[:1000]) + "\n[… truncated: " + grouped(len(raw)) + " bytes, showing the first 1,000]"
	if got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	if !p.Truncated || p.OutputBytes != int64(len(raw)) {
		t.Fatalf("truncated %v, output_bytes %d; want true, %d", p.Truncated, p.OutputBytes, len(raw))
	}
	if strings.Contains(string(p.Output), `\u003c`) {
		t.Fatalf("< is escaped in %s", p.Output[:80])
	}
}

func TestCapOutputUnderTheCap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		output string
		max    int
	}{
		{"short string", `"sunny"`, 64},
		{"exactly the cap", `"` + strings.Repeat("x", 62) + `"`, 64},
		{"object", `{"temp_c": 21}`, 64},
		{"null", `null`, 4},
		{"escapes longer than the cap, text shorter", `"` + strings.Repeat(`\u00e9`, 20) + `"`, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := bigResult(tc.output).CapOutput(tc.max)
			if string(p.Output) != tc.output || p.Truncated || p.OutputBytes != 0 {
				t.Fatalf("got %s (truncated %v, output_bytes %d), want it unchanged", p.Output, p.Truncated, p.OutputBytes)
			}
		})
	}
}

func TestCapOutputLeavesOthersAlone(t *testing.T) {
	long := `"` + strings.Repeat("x", 100) + `"`
	call := Part{Type: PartToolCall, ToolCallID: "c1", ToolName: "big", Args: json.RawMessage(`{"q":` + long + `}`)}
	if got := call.CapOutput(10); string(got.Args) != string(call.Args) || got.Truncated {
		t.Fatalf("a tool call changed: %+v", got)
	}
	once := bigResult(long).CapOutput(10)
	if twice := once.CapOutput(10); string(twice.Output) != string(once.Output) || twice.OutputBytes != 100 {
		t.Fatalf("capping twice changed the result: %s, %d", twice.Output, twice.OutputBytes)
	}
	if got := bigResult(long).CapOutput(0); got.Truncated {
		t.Fatalf("max 0 is not the default cap: %s", got.Output)
	}
}

func TestTruncatedResultJSON(t *testing.T) {
	p := bigResult(`"` + strings.Repeat("x", 100) + `"`).CapOutput(10)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"tool-result","tool_call_id":"c1","tool_name":"big","output":"xxxxxxxxxx\n[… truncated: 100 bytes, showing the first 10]","is_error":false,"output_bytes":100,"truncated":true}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back Part
	if err := json.Unmarshal(b, &back); err != nil || back.OutputBytes != 100 || !back.Truncated {
		t.Fatalf("read back %+v, %v", back, err)
	}
	b, _ = json.Marshal(bigResult(`"short"`))
	if strings.Contains(string(b), "truncated") || strings.Contains(string(b), "output_bytes") {
		t.Fatalf("a whole result carries the fields: %s", b)
	}
}

func TestGrouped(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 65536: "65,536", 123456: "123,456", 10485760: "10,485,760"} {
		if got := grouped(n); got != want {
			t.Errorf("grouped(%d) = %q, want %q", n, got, want)
		}
	}
}
