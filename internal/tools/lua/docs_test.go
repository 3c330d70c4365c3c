package lua

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocumentedScriptsLoad loads every Lua block of docs/lua-tools.md that
// declares a tool, so the tutorial cannot drift from what the source
// accepts.
func TestDocumentedScriptsLoad(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "lua-tools.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```lua\n")[1:]
	n := 0
	for _, b := range blocks {
		code, _, _ := strings.Cut(b, "```")
		if !strings.Contains(code, "tool{") {
			continue
		}
		n++
		s := openSource(t, code)
		if strings.Contains(code, "roll_dice") {
			if got := okJSON(t, invokeOne(t, s, "roll_dice", `{"count":3}`)); !strings.Contains(got, `"total":`) {
				t.Errorf("roll_dice: %s", got)
			}
		}
	}
	if n < 3 {
		t.Errorf("found %d tool scripts in the tutorial, want at least 3", n)
	}
}
