package browsertest

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestBrowserTruncatedResult: a tool result over tools.max_result_bytes
// shows on its card as cut, with its full size, above the output, which
// ends with the marker the model saw.
func TestBrowserTruncatedResult(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "big.lua")
	lua := `tool{name = "big", description = "a huge result", handler = function(input) return string.rep("x", 1000000) end}`
	if err := os.WriteFile(script, []byte(lua), 0o600); err != nil {
		t.Fatal(err)
	}
	u := startUI(t, "tools:\n  max_result_bytes: 100\n  lua:\n    - {name: big, path: "+script+"}\n")
	b := newBrowser(t, desktop)

	u.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_big", Name: "big", Args: `{}`}}},
		llmtest.Turn{Text: "That was long."},
	)
	id := u.createChat(t, `{"title": "truncated"}`)
	b.openChat(u, id)
	if code, body := do(t, http.MethodPost, u.URL+"/api/v1/chats/"+id+"/messages", u.Token, `{"message": "call big"}`); code != http.StatusAccepted {
		t.Fatalf("post message: %d %s", code, body)
	}
	b.waitAnyText("the answer shows", answerText, "That was long.")
	card := `.tool-card[data-tool-call-id="call_big"]`
	if got, want := b.text(card+" .tool-truncated"), "truncated — 1,000,000 bytes in full"; got != want {
		t.Errorf("the card's marker is %q, want %q", got, want)
	}
	out := b.text(card + " .tool-output")
	if want := "\n[… truncated: 1,000,000 bytes, showing the first 100]"; !strings.HasSuffix(out, want) || !strings.HasPrefix(out, strings.Repeat("x", 100)+"\n") {
		t.Errorf("the card's output is %q, want 100 x then %q", out, want)
	}
	b.screenshot("tool-result-truncated")
}
