package browsertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/mcptest"
)

// TestBrowserMCPProgress: a call of the MCP reference server's
// long-running operation shows its progress reports on its card while it
// runs (each one the server sends reaches the page), then its result, and
// the progress bar goes once the result is there.
func TestBrowserMCPProgress(t *testing.T) {
	t.Parallel()
	bin := mcptest.Everything(t)
	u := startUI(t, fmt.Sprintf(`tools:
  mcp:
    - name: everything
      command: [%q, "stdio"]
`, bin))
	const tool = "everything_trigger-long-running-operation"
	waitForTool(t, u, tool)
	b := newBrowser(t, desktop)

	u.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_p", Name: tool, Args: `{"duration": 0.6, "steps": 3}`}}},
		llmtest.Turn{Text: "The operation is done."},
	)
	id := u.createChat(t, `{"title": "progress"}`)
	b.openChat(u, id)
	// Every state of the card is recorded as it changes, so a report the
	// page shows for a moment is not missed between two looks.
	eval[bool](b, `(() => {
		window.__progress = [];
		new MutationObserver(() => {
			const bar = document.querySelector('.tool-card[data-tool-call-id="call_p"] progress.tool-progress');
			if (bar) window.__progress.push({value: bar.value, max: bar.max,
				text: bar.parentElement.querySelector(".tool-progress-message")?.textContent ?? ""});
		}).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
		return true;
	})()`)
	if code, body := do(t, http.MethodPost, u.URL+"/api/v1/chats/"+id+"/messages", u.Token, `{"message": "run the long operation"}`); code != http.StatusAccepted {
		t.Fatalf("post message: %d %s", code, body)
	}

	b.waitAnyText("the answer shows", answerText, "The operation is done.")
	card := `.tool-card[data-tool-call-id="call_p"]`
	if st := eval[string](b, `document.querySelector('`+card+`').dataset.state`); st != "done" {
		t.Errorf("the card's state is %q, want done", st)
	}
	if n := b.count(card + " progress.tool-progress"); n != 0 {
		t.Errorf("the progress bar stays after the result (%d)", n)
	}
	var seen []struct {
		Value, Max float64
		Text       string
	}
	if err := json.Unmarshal([]byte(eval[string](b, `JSON.stringify(window.__progress)`)), &seen); err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 {
		t.Fatal("the card never showed a progress report")
	}
	last := seen[len(seen)-1]
	if last.Max != 3 || last.Value < 1 || last.Value > 3 || !strings.Contains(last.Text, "/3") {
		t.Errorf("the last progress shown is %+v, want n of 3", last)
	}
	b.screenshot("mcp-progress-done")
}

// waitForTool waits until serve lists the server-side tool name (an MCP
// server's tools appear once its session is up).
func waitForTool(t *testing.T, u *uiServer, name string) {
	t.Helper()
	deadline := time.Now().Add(browserTimeout)
	for {
		code, body := get(t, u.URL+"/api/v1/tools", u.Token)
		if code == http.StatusOK && strings.Contains(body, `"name":"`+name+`"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve does not list %s within %s: %d %s", name, browserTimeout, code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
