package browsertest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// unnamedControls is a JavaScript expression: the buttons, inputs,
// selects and text boxes of the page that have no accessible name (no
// aria-label, aria-labelledby, label, title, nor, for a button, text with
// a letter or a digit: an icon alone is no name).
const unnamedControls = `[...document.querySelectorAll("button, input, select, textarea")].filter((el) => {
	if (el.type === "hidden") return false;
	const byIds = (el.getAttribute("aria-labelledby") || "").split(/\s+/).filter(Boolean)
		.map((id) => document.getElementById(id)?.textContent ?? "").join(" ");
	const name = [el.getAttribute("aria-label"), byIds, [...(el.labels || [])].map((l) => l.textContent).join(" "),
		el.tagName === "BUTTON" && /[\p{L}\p{N}]/u.test(el.textContent) ? el.textContent : "", el.getAttribute("title")].map((s) => (s || "").trim()).find(Boolean);
	return !name;
}).map((el) => el.outerHTML.slice(0, 160))`

// announced is the text of the page's polite live region.
const announced = `document.querySelector("#announcer[aria-live=polite]")?.textContent ?? "(no polite #announcer)"`

// press sends one key to the element that has the focus.
func (b *browser) press(key string) {
	b.t.Helper()
	b.do("press "+fmt.Sprintf("%q", key), chromedp.KeyEvent(key))
}

// focused is a short description of the element that has the focus.
const focused = `(() => { const e = document.activeElement; return e ? e.tagName.toLowerCase() + "." + e.className + (e.closest("fieldset") ? " in " + e.closest("fieldset").dataset.toolCallId : "") : "none"; })()`

// TestBrowserAccessibleApproval: two calls wait for approval. The live
// region says so; each is decided with the keyboard only (Tab to the
// button, Enter), the first decision says "1 of 2 decided"; the finished
// answer is then what the live region says, and only it. The panel takes
// the focus when it appears. Every control of the page has an accessible
// name; the chat list is one Tab stop, and the arrow keys walk it with a
// visible focus.
func TestBrowserAccessibleApproval(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	const answer = "Paris and Tokyo, both read."
	u.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{
			{ID: "call_k1", Name: "current_time", Args: `{"timezone":"Europe/Paris"}`},
			{ID: "call_k2", Name: "current_time", Args: `{"timezone":"Asia/Tokyo"}`},
		}},
		llmtest.Turn{Text: answer},
	)
	other := u.createChat(t, `{"title": "another chat"}`)
	id := u.createChat(t, `{"title": "keyboard", "approve": ["current_time"]}`)
	b.openChat(u, id)
	b.waitConnections("connected")
	if got := eval[string](b, announced); got != "" {
		t.Errorf("opening a chat announces %q", got)
	}
	if code, body := do(t, http.MethodPost, u.URL+"/api/v1/chats/"+id+"/messages", u.Token, `{"message": "what time is it in Paris and Tokyo?"}`); code != http.StatusAccepted {
		t.Fatalf("post message: %d %s", code, body)
	}
	first, second := callForm("approval", "call_k1"), callForm("approval", "call_k2")
	b.visible(second + " button.approve")
	b.waitJS("the live region says the chat waits for approval", announced+` === "Waiting for your approval"`, announced)
	if got := eval[string](b, focused); !eval[bool](b, `Boolean(document.activeElement.closest("section#action"))`) {
		t.Errorf("the focus is on %s when the approval panel appears, want the panel", got)
	}
	if bad := eval[[]string](b, unnamedControls); len(bad) != 0 {
		t.Errorf("controls without an accessible name while approving: %q", bad)
	}
	// The check itself sees an icon-only button and an unlabelled input.
	probe := eval[[]string](b, `(() => {
		const probe = document.createElement("div");
		probe.innerHTML = '<button type="button" class="probe">★</button><input class="probe"><button type="button" aria-label="Star">★</button>';
		document.body.append(probe);
		const bad = `+unnamedControls+`;
		probe.remove();
		return bad;
	})()`)
	if len(probe) != 2 || !strings.Contains(probe[0], "probe") || !strings.Contains(probe[1], "probe") {
		t.Errorf("the accessible-name check reports %q for two unnamed controls", probe)
	}

	// Keyboard only: from the reason field, Tab reaches Approve, Enter presses it.
	b.do("focus the first reason", chromedp.Focus(first+" input.reason"))
	b.press(kb.Tab)
	if got := eval[string](b, focused); got != "button.approve primary in call_k1" {
		t.Fatalf("after Tab from the reason the focus is on %s, want the first Approve", got)
	}
	b.press(kb.Enter)
	b.waitText("the panel says one of two is decided", "section#action .decisions-progress",
		`t === "1 of 2 decided — waiting for your other decision"`)
	if d := eval[string](b, fmt.Sprintf(`document.querySelector(%s).dataset.decision ?? ""`, jsString(first))); d != "approve" {
		t.Errorf("the first call is marked %q, want approve", d)
	}
	if n := len(u.fake.Requests()); n != 1 {
		t.Errorf("the model was asked again (%d requests) before both calls were decided", n)
	}
	b.screenshot("one-of-two")
	// The focus moved on to the call that waits: Tab to Deny, Enter.
	if got := eval[string](b, focused); got != "button.approve primary in call_k2" {
		t.Fatalf("after the first decision the focus is on %s, want the second Approve", got)
	}
	b.press(kb.Tab)
	b.press(kb.Enter)
	b.waitText("the denial shows on the card", toolCard("call_k2")+" .tool-decision", `/denied/i.test(t)`)
	b.waitAnyText("the answer shows", answerText, answer)
	b.waitStatus("waiting")
	b.waitJS("the live region says the answer", announced+` === `+jsString(answer), announced)
	if bad := eval[[]string](b, unnamedControls); len(bad) != 0 {
		t.Errorf("controls without an accessible name after the run: %q", bad)
	}

	// The chat list is one Tab stop, whatever it holds: Tab from the
	// filter before it lands on a chat, the next Tab leaves the list.
	for i := range 3 {
		u.createChat(t, fmt.Sprintf(`{"title": "filler %d"}`, i))
	}
	b.waitCount("the list shows every chat", "#chat-list li.chat-item", 5)
	b.do("focus the filter before the list", chromedp.Focus("#filter-archived"))
	b.press(kb.Tab)
	if got := eval[string](b, `document.activeElement.closest("li.chat-item")?.dataset.chatId ?? document.activeElement.outerHTML.slice(0, 80)`); got != id {
		t.Errorf("Tab into the list lands on %s, want the open chat %s", got, id)
	}
	b.press(kb.Tab)
	if eval[bool](b, `Boolean(document.activeElement.closest("#chat-list"))`) {
		t.Errorf("a second Tab stays in the chat list, on %s", eval[string](b, focused))
	}

	// The chat list: the arrow keys move from one chat to the next.
	b.do("focus the first chat of the list", chromedp.Focus(chatItem(id)+" a"))
	b.press(kb.ArrowDown)
	if got := eval[string](b, `document.activeElement.closest("li.chat-item")?.dataset.chatId ?? ""`); got != other {
		t.Errorf("ArrowDown moved the focus to chat %q, want the next one, %s", got, other)
	}
	if !eval[bool](b, `document.activeElement.matches(":focus-visible") && getComputedStyle(document.activeElement).outlineStyle !== "none"`) {
		t.Error("the chat the focus is on shows no focus ring")
	}
	b.press(kb.ArrowUp)
	if got := eval[string](b, `document.activeElement.closest("li.chat-item")?.dataset.chatId ?? ""`); got != id {
		t.Errorf("ArrowUp moved the focus to chat %q, want %s", got, id)
	}
	if res := modelRequests(t, u.fake); len(res) != 2 {
		t.Errorf("the model got %d requests, want 2", len(res))
	} else if r, _ := toolResult(res[1], "call_k2"); !strings.Contains(r, "denied") {
		t.Errorf("the denied call's result is %q", r)
	}
}
