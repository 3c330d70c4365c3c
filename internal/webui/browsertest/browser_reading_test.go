package browsertest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/mcptest"
)

// gapJS is how far, in pixels, the conversation's end is below the bottom
// of its scrolling box.
const gapJS = `(() => { const s = document.querySelector("#chat-scroll"); return s.scrollHeight - s.scrollTop - s.clientHeight; })()`

// waitAtBottom waits until the conversation shows its end (a pixel or two
// of rounding allowed).
func (b *browser) waitAtBottom(what string) {
	b.t.Helper()
	b.waitJS(what+": the conversation shows its end", gapJS+` <= 2`, `String(`+gapJS+`)`)
}

// paragraphs is an answer of n short paragraphs, each saying who and
// which: tall enough to scroll.
func paragraphs(who string, n int) string {
	var s []string
	for i := 1; i <= n; i++ {
		s = append(s, fmt.Sprintf("%s, line %d: words to fill a line of the answer.", who, i))
	}
	return strings.Join(s, "\n\n")
}

// TestBrowserFollowsNewContent: while the reader is at the end of the
// conversation, each new message, the text streaming in and the action
// panel keep it in view, without the test touching the scroll position.
// Once the reader scrolls up, new content leaves the view where it is and
// a "New messages" button appears; it brings the end back and goes.
func TestBrowserFollowsNewContent(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	gate, started := make(chan struct{}), make(chan struct{})
	u.fake.Push(
		llmtest.Turn{Text: paragraphs("first answer", 30)},
		llmtest.Turn{Text: paragraphs("second answer", 30), ChunkSize: 100, Gate: gate, GateAfter: 12, Started: started},
		llmtest.Turn{Text: "Let me look at the clock.", ToolCalls: []llmtest.ToolCall{{ID: "call_f1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
		llmtest.Turn{Text: paragraphs("last answer", 30)},
		llmtest.Turn{Text: "the fourth answer"},
	)
	id := u.createChat(t, `{"title": "following", "approve": ["current_time"]}`)
	b.openChat(u, id)

	b.typeInto("#composer-input", "first question\r")
	b.waitAnyText("the first answer shows", answerText, "first answer, line 30:")
	b.waitAtBottom("after the first answer")
	if h := eval[int](b, `document.querySelector("#chat-scroll").scrollHeight - document.querySelector("#chat-scroll").clientHeight`); h < 400 {
		t.Fatalf("the conversation overflows its box by %d px only: the test shows nothing", h)
	}

	b.typeInto("#composer-input", "second question\r")
	b.waitClosed("the model is called", started)
	b.waitText("the second answer streams in", draftText, `t.includes("second answer, line 10:")`)
	b.waitAtBottom("while the second answer streams")
	close(gate)
	b.waitAnyText("the second answer shows", answerText, "second answer, line 30:")
	b.waitAtBottom("after the second answer")

	b.typeInto("#composer-input", "third question\r")
	b.visible(callForm("approval", "call_f1") + " button.approve")
	b.waitAtBottom("with the approval panel")
	inView := eval[bool](b, `(() => {
		const s = document.querySelector("#chat-scroll").getBoundingClientRect();
		const a = document.querySelector("section#action").getBoundingClientRect();
		return a.height > 0 && a.top >= s.top && a.bottom <= s.bottom + 1;
	})()`)
	if !inView {
		t.Error("the action panel is not inside the visible part of the conversation")
	}
	if got := eval[string](b, `document.activeElement.closest("section#action") ? "the panel" : document.activeElement.outerHTML.slice(0, 80)`); got != "the panel" {
		t.Errorf("the focus is on %s when the action panel appears, want the panel", got)
	}
	if eval[bool](b, `document.querySelector("#jump-bottom").checkVisibility()`) {
		t.Error("the New messages button shows while the reader is at the end")
	}
	b.screenshot("following-panel")

	// The reader scrolls up to read; the call is approved elsewhere, and
	// its result and the last answer arrive below.
	eval[chromedp.Void](b, `document.querySelector("#chat-scroll").scrollTop = 200`)
	b.waitJS("the view stops following", `document.querySelector("#chat-scroll").dataset.following === "false"`,
		`document.querySelector("#chat-scroll").dataset.following ?? "(unset)"`)
	if code, body := do(t, http.MethodPost, u.URL+"/api/v1/chats/"+id+"/approvals", u.Token,
		`{"decisions": [{"tool_call_id": "call_f1", "approve": true}]}`); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, body)
	}
	b.waitAnyText("the last answer shows", answerText, "last answer, line 30:")
	b.visible("#jump-bottom")
	if got := strings.TrimSpace(b.text("#jump-bottom")); got != "New messages ↓" {
		t.Errorf("the button says %q", got)
	}
	if top := eval[float64](b, `document.querySelector("#chat-scroll").scrollTop`); top != 200 {
		t.Errorf("new content moved the view of a reader who scrolled up: scrollTop %v, want 200", top)
	}
	b.screenshot("following-jump")
	b.click("#jump-bottom")
	b.waitAtBottom("after the New messages button")
	b.do("wait for the button to go", chromedp.WaitNotVisible(chromedp.CSS("#jump-bottom")))
	if f := eval[string](b, `document.querySelector("#chat-scroll").dataset.following`); f != "true" {
		t.Errorf("after the button the view's following is %q, want true", f)
	}

	// Scrolled up again, the reader sends a message: the view goes to it.
	eval[chromedp.Void](b, `document.querySelector("#chat-scroll").scrollTop = 200`)
	b.waitJS("the view stops following", `document.querySelector("#chat-scroll").dataset.following === "false"`,
		`document.querySelector("#chat-scroll").dataset.following ?? "(unset)"`)
	b.typeInto("#composer-input", "fourth question\r")
	b.waitAnyText("the fourth answer shows", answerText, "the fourth answer")
	b.waitAtBottom("after sending while scrolled up")
	if b.visibleCount("#jump-bottom") != 0 {
		t.Error("the New messages button shows after sending")
	}
}

// TestBrowserLongTextImagesAndCopy: a 5,000-character unbroken string in
// an answer, in tool arguments and in a result wraps (or, in a code block,
// scrolls inside its box), so the page never scrolls sideways; the MCP
// reference server's image shows as an image, an SVG "image" does not; a
// long result is folded behind "Show all"; the Copy buttons of a code
// block and of an answer put its code and its Markdown on the clipboard.
func TestBrowserLongTextImagesAndCopy(t *testing.T) {
	t.Parallel()
	bin := mcptest.Everything(t)
	script := filepath.Join(t.TempDir(), "long.lua")
	lua := `tool{name = "echo", description = "says it back", input_schema = {properties = {blob = {type = "string"}}},
  handler = function(input) return input.blob end}
tool{name = "lines", description = "a long result", handler = function()
  local t = {}
  for i = 1, 100 do t[#t + 1] = "output line " .. i end
  return table.concat(t, "\n")
end}
tool{name = "svg", description = "an image of a type the page does not show", handler = function()
  return {content = {{type = "image", mime_type = "image/svg+xml", data = "PHN2Zy8+"}}}
end}
`
	if err := os.WriteFile(script, []byte(lua), 0o600); err != nil {
		t.Fatal(err)
	}
	u := startUI(t, fmt.Sprintf(`tools:
  lua:
    - {name: long, path: %s}
  mcp:
    - name: everything
      command: [%q, "stdio"]
`, script, bin))
	const image = "everything_get-tiny-image"
	waitForTool(t, u, image)
	b := newBrowser(t, desktop)

	blob := strings.Repeat("QUJD", 1250) // 5,000 characters, no break
	code := "fmt.Println(\"" + blob + "\")"
	answer := "The link: https://example.com/" + blob + "\n\n```go\n" + code + "\n```\n\nThat is all."
	u.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{
			{ID: "call_echo", Name: "echo", Args: `{"blob":"` + blob + `"}`},
			{ID: "call_lines", Name: "lines", Args: `{}`},
			{ID: "call_img", Name: image, Args: `{}`},
			{ID: "call_svg", Name: "svg", Args: `{}`},
		}},
		llmtest.Turn{Text: answer},
	)
	id := u.createChat(t, `{"title": "long lines"}`)
	b.openChat(u, id)
	if code, body := do(t, http.MethodPost, u.URL+"/api/v1/chats/"+id+"/messages", u.Token, `{"message": "show me"}`); code != http.StatusAccepted {
		t.Fatalf("post message: %d %s", code, body)
	}
	b.waitAnyText("the answer shows", answerText, "That is all.")
	b.waitStatus("waiting")

	// Nothing scrolls sideways but the code block, inside itself.
	for _, sel := range []string{"document.documentElement", `document.querySelector("#chat-scroll")`} {
		if over := eval[int](b, sel+`.scrollWidth - `+sel+`.clientWidth`); over > 0 {
			t.Errorf("%s is %d px wider than its view", sel, over)
		}
	}
	if !strings.Contains(b.text(toolCard("call_echo")+" .tool-args"), blob) || !strings.Contains(b.text(toolCard("call_echo")+" .tool-output"), blob) {
		t.Error("the echo card does not show the string in its arguments and its result")
	}
	// The block scrolls sideways inside itself: its <pre>, or the <code>
	// in it (highlight.js's style makes that the scrolling box).
	scrolls := `(() => {
		const p = document.querySelector("#messages .msg-text pre");
		return [p, p.querySelector("code")].some((e) => e.clientWidth > 0 && e.scrollWidth > e.clientWidth && getComputedStyle(e).overflowX === "auto");
	})()`
	if !eval[bool](b, scrolls) {
		t.Error("the code block does not scroll inside its own box")
	}

	// The MCP image is an image; the base64 is not shown as text.
	imgs := eval[[]string](b, fmt.Sprintf(`[...document.querySelectorAll(%s)].map((i) => i.getAttribute("src").slice(0, 40))`, jsString(toolCard("call_img")+" img.tool-image")))
	if len(imgs) != 1 || !strings.HasPrefix(imgs[0], "data:image/png;base64,") {
		t.Errorf("the image card shows the images %q, want one data:image/png", imgs)
	}
	b.waitJS("the image is decoded", fmt.Sprintf(`document.querySelector(%s)?.naturalWidth > 0`, jsString(toolCard("call_img")+" img.tool-image")), "")
	if txt := b.text(toolCard("call_img") + " .tool-output"); strings.Contains(txt, "iVBORw0KGgo") || !strings.Contains(txt, "Here's the image you requested") {
		t.Errorf("the image card's text is %q: want the server's text and no base64", txt)
	}
	if n := b.count(toolCard("call_svg") + " img"); n != 0 {
		t.Errorf("an SVG result became %d <img>", n)
	}
	if txt := b.text(toolCard("call_svg") + " .tool-output"); !strings.Contains(txt, "image/svg+xml") {
		t.Errorf("the SVG result shows %q, want its JSON", txt)
	}

	// The long result is folded until asked.
	lines := toolCard("call_lines")
	if !eval[bool](b, fmt.Sprintf(`document.querySelector(%s).classList.contains("folded")`, jsString(lines+" pre.tool-output"))) {
		t.Error("a result of 100 lines is not folded")
	}
	if got := b.text(lines + " button.fold-toggle"); !strings.HasPrefix(got, "Show all (100 lines") {
		t.Errorf("the fold button says %q", got)
	}
	b.click(lines + " button.fold-toggle")
	b.waitJS("the result unfolds", fmt.Sprintf(`!document.querySelector(%s).classList.contains("folded")`, jsString(lines+" pre.tool-output")), "")
	if exp := eval[string](b, fmt.Sprintf(`document.querySelector(%s).getAttribute("aria-expanded")`, jsString(lines+" button.fold-toggle"))); exp != "true" {
		t.Errorf("the unfolded button's aria-expanded is %q", exp)
	}
	// Unfolding is the reader's doing, not news: no New messages button.
	if eval[bool](b, `document.querySelector("#jump-bottom").checkVisibility()`) {
		t.Error("unfolding a result shows the New messages button")
	}
	b.screenshot("long-lines")

	// Copy: what is written to the clipboard is recorded.
	eval[chromedp.Void](b, `window.__copied = []; navigator.clipboard.writeText = async (t) => { window.__copied.push(t); }`)
	const last = "#messages li.msg.last-answer"
	b.click(last + " .code-block button.code-copy")
	b.waitText("the code's button says Copied", last+" .code-block button.code-copy", `t === "Copied"`)
	b.click(last + " .msg-actions button.msg-copy")
	b.waitText("the answer's button says Copied", last+" .msg-actions button.msg-copy", `t === "Copied"`)
	copied := eval[[]string](b, `window.__copied`)
	if len(copied) != 2 || copied[0] != code || copied[1] != answer {
		t.Errorf("the clipboard got %d texts; want the code, then the answer's Markdown", len(copied))
		for i, c := range copied {
			t.Logf("copied %d: %.80q…", i, c)
		}
	}
}
