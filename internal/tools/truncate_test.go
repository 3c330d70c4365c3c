package tools

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/tools/lua"
	"github.com/parleyhq/parley/tool"
)

// tenMiB is the size of the huge results of these tests.
const tenMiB = 10 << 20

// bigLua is a Lua script whose lua_big tool returns tenMiB bytes of text.
const bigLua = `
tool{
  name = "lua_big",
  description = "a huge result",
  handler = function(input) return string.rep("l", 10 * 1024 * 1024) end,
}
`

// textTool is a built-in tool that returns a result of the given text.
func textTool(name string, r tool.Result) tool.Tool {
	return tool.Func(tool.Decl{Name: name, Description: "text", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, tool.Call) (tool.Result, error) { return r, nil })
}

// expectCapped fails the test unless p is a truncated result whose output is
// the string of full's first shown bytes, then marker.
func expectCapped(t *testing.T, p chat.Part, full string, shown int, marker string) {
	t.Helper()
	var got string
	if err := json.Unmarshal(p.Output, &got); err != nil {
		t.Fatalf("output of %s is not a JSON string: %v", p.ToolCallID, err)
	}
	if want := full[:shown] + marker; got != want {
		t.Fatalf("output of %s is %d bytes ending %q, want %d bytes ending %q",
			p.ToolCallID, len(got), got[max(0, len(got)-80):], len(want), want[max(0, len(want)-80):])
	}
	if !p.Truncated || p.OutputBytes != int64(len(full)) {
		t.Fatalf("result of %s: truncated %v, output_bytes %d; want true, %d", p.ToolCallID, p.Truncated, p.OutputBytes, len(full))
	}
}

// TestRunCapsEveryResult runs a step whose built-in, Lua and batch-source
// (as MCP's) tools return 10 MiB each, one of them as an error: each result
// is cut to the default 64 KiB with the marker and the full size; a small
// result is unchanged.
func TestRunCapsEveryResult(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.lua")
	if err := os.WriteFile(path, []byte(bigLua), 0o600); err != nil {
		t.Fatal(err)
	}
	luaSrc, err := lua.Open("lua", path, lua.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]string, 0, tenMiB/16)
	for len(rows)*16 < tenMiB {
		rows = append(rows, `{"row":"abcdef"}`)
	}
	bigJSON := "[" + strings.Join(rows, ",") + "]"
	mcpSrc := newFakeSource("mcp", "mcp_big")
	mcpSrc.invoke = func(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
		return []tool.Result{{Output: json.RawMessage(bigJSON)}}, nil
	}
	bigText := strings.Repeat("t", tenMiB)
	reg := newRegistry(t, []tool.Tool{
		textTool("text_big", tool.Text(bigText)),
		textTool("error_big", tool.Errorf("%s", bigText)),
		echoTool("dice", nil),
	}, luaSrc, mcpSrc)
	t.Cleanup(func() { reg.Close() })
	d := NewDispatcher(reg, Options{}, discard())

	calls := []chat.ToolCall{
		{ToolCallID: "c1", ToolName: "text_big", Args: json.RawMessage(`{}`)},
		{ToolCallID: "c2", ToolName: "lua_big", Args: json.RawMessage(`{}`)},
		call("c3", "mcp_big", 3),
		{ToolCallID: "c4", ToolName: "error_big", Args: json.RawMessage(`{}`)},
		call("c5", "dice", 5),
	}
	out := d.Run(context.Background(), Step{ChatID: "chat-1", Calls: calls})
	if len(out.Results) != 5 {
		t.Fatalf("%d results, want 5: %v", len(out.Results), resultIDs(out.Results))
	}
	const marker = "\n[… truncated: 10,485,760 bytes, showing the first 65,536]"
	expectCapped(t, resultByID(t, out.Results, "c1"), bigText, 64<<10, marker)
	expectCapped(t, resultByID(t, out.Results, "c2"), strings.Repeat("l", tenMiB), 64<<10, marker)
	expectCapped(t, resultByID(t, out.Results, "c3"), bigJSON, 64<<10,
		"\n[… truncated: "+commas(len(bigJSON))+" bytes, showing the first 65,536]")
	errPart := resultByID(t, out.Results, "c4")
	expectCapped(t, errPart, bigText, 64<<10, marker)
	if !errPart.IsError {
		t.Fatal("the capped error result is no longer an error")
	}
	if p := resultByID(t, out.Results, "c5"); string(p.Output) != `{"args":{"x":5},"chat":"chat-1","tool":"dice"}` || p.Truncated || p.OutputBytes != 0 {
		t.Fatalf("small result changed: %s (truncated %v, output_bytes %d)", p.Output, p.Truncated, p.OutputBytes)
	}
}

// TestRunCapIsConfigurable caps results at Options.MaxResultBytes: text at
// a UTF-8 boundary, JSON as the string of its text.
func TestRunCapIsConfigurable(t *testing.T) {
	accents := strings.Repeat("é", 50)
	reg := newRegistry(t, []tool.Tool{textTool("accents", tool.Text(accents)), echoTool("dice", nil)})
	d := NewDispatcher(reg, Options{MaxResultBytes: 11}, discard())
	out := d.Run(context.Background(), Step{ChatID: "chat-1", Calls: []chat.ToolCall{
		{ToolCallID: "c1", ToolName: "accents", Args: json.RawMessage(`{}`)},
		call("c2", "dice", 2),
	}})
	expectCapped(t, resultByID(t, out.Results, "c1"), accents, 10, "\n[… truncated: 100 bytes, showing the first 10]")
	dice := `{"args":{"x":2},"chat":"chat-1","tool":"dice"}`
	expectCapped(t, resultByID(t, out.Results, "c2"), dice, 11, "\n[… truncated: 46 bytes, showing the first 11]")
}

// commas writes n with commas between groups of three digits, as the
// marker does.
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
