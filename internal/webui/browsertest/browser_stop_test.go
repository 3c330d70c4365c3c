package browsertest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestBrowserStoppedAndQueued: an answer cut by Stop keeps what it said
// with a "Stopped" mark, also after a reload, and the message queued
// meanwhile says it runs now, once it starts.
func TestBrowserStoppedAndQueued(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	const partial = "A long answe" // 3 deltas of 4 runes, after the role chunk
	gate, started, gone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(gate) }) // never opened before: only Stop ends the turn
	u.fake.Push(
		llmtest.Turn{Text: "A long answer the person stops halfway.", ChunkSize: 4, Gate: gate, GateAfter: 4, Started: started, Gone: gone},
		llmtest.Turn{Text: "The answer to the queued message."},
	)
	id := u.createChat(t, `{"title": "stop", "message": "tell me everything"}`)
	b.openChat(u, id)
	b.waitClosed("the model is called", started)
	b.waitText("the draft shows what has streamed", draftText, fmt.Sprintf(`t.includes(%s)`, jsString(partial)))
	b.typeInto("#composer-input", "and then this\r")
	b.waitCount("the second message is queued", `#messages li.msg.queued`, 1)
	b.do("wait for Stop to be enabled", chromedp.WaitEnabled(chromedp.CSS("#interrupt")))
	b.click("#interrupt")
	b.waitClosed("the model call is cancelled", gone)

	const stopped = `#messages li.msg[data-role=assistant][data-stopped=true]`
	b.waitText("the cut answer says it was stopped", stopped+" .msg-stopped", `t === "Stopped — this answer was cut short"`)
	if got := strings.TrimSpace(b.text(stopped + " .msg-text")); !strings.HasPrefix(got, partial) {
		t.Errorf("the stopped answer says %q, want what had streamed, %q…", got, partial)
	}
	const fromQueue = `#messages li.msg[data-role=user][data-from-queue=true]`
	b.waitText("the queued message says it runs now", fromQueue+" .from-queue", `t === "Running your queued message"`)
	if got := b.text(fromQueue + " .msg-text"); got != "and then this" {
		t.Errorf("the message marked as running from the queue says %q", got)
	}
	b.waitAnyText("the queued message is answered", answerText, "The answer to the queued message.")
	b.waitStatus("waiting")
	if n := b.count(`#messages li.msg[data-stopped]`); n != 1 {
		t.Errorf("%d answers are marked stopped, want 1", n)
	}
	if n := b.count(`#messages li.msg[data-from-queue]`); n != 1 {
		t.Errorf("%d messages are marked as run from the queue, want 1", n)
	}
	b.waitJS("the live region says the last answer", announced+` === "The answer to the queued message."`, announced)
	b.screenshot("stopped-and-queued")

	b.do("reload", chromedp.Reload())
	b.visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, id))
	b.waitAnyText("the answer shows after the reload", answerText, "The answer to the queued message.")
	b.waitText("after a reload the cut answer still says it was stopped", stopped+" .msg-stopped", `t === "Stopped — this answer was cut short"`)
	if n := b.count(`#messages li.msg[data-stopped]`); n != 1 {
		t.Errorf("after a reload %d answers are marked stopped, want 1", n)
	}
}

// fieldErrors is a JavaScript expression: the error messages shown in the
// fieldset sel, in order.
func fieldErrors(sel string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%s)].filter((e) => e.checkVisibility()).map((e) => e.textContent)`,
		jsString(sel+" .field-error, "+sel+" .form-error li, "+sel+" .json-error li"))
}

// TestBrowserToolFormErrors: what is wrong with a dynamic tool's result
// is said once, by the field, in words: in the form made from its schema
// and under the JSON editor; the keyboard sends the result with
// Ctrl+Enter.
func TestBrowserToolFormErrors(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	u.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{
			{ID: "call_form", Name: "thermo", Args: `{}`},
			{ID: "call_json", Name: "thermo_json", Args: `{}`},
		}},
		llmtest.Turn{Text: "Thanks for the readings."},
	)
	const plain = `{"type": "object", "properties": {"temp_c": {"type": "number"}, "unit": {"enum": ["c", "f"]}}, "required": ["temp_c", "unit"]}`
	// A property of its own object: no form, a JSON editor.
	const nested = `{"type": "object", "properties": {"temp_c": {"type": "number"}, "unit": {"enum": ["c", "f"]}, "where": {"type": "object"}}, "required": ["temp_c", "unit"]}`
	id := u.createChat(t, `{"title": "form errors", "message": "read the thermometers",
		"dynamic_tools": [
			{"name": "thermo", "description": "A thermometer", "input_schema": {"type": "object"}, "output_schema": `+plain+`},
			{"name": "thermo_json", "description": "Another", "input_schema": {"type": "object"}, "output_schema": `+nested+`}]}`)
	b.openChat(u, id)
	form, js := callForm("client", "call_form"), callForm("client", "call_json")
	b.visible(form + ` [name="temp_c"]`)
	b.visible(js + " textarea.json-editor")
	if bad := eval[[]string](b, unnamedControls); len(bad) != 0 {
		t.Errorf("controls without an accessible name in the form: %q", bad)
	}

	// Nothing entered.
	b.click("#submit-results")
	b.waitJS("the form says temp_c is required", fieldErrors(form)+`.join("|") === "temp_c is required"`, fieldErrors(form))
	if n := eval[int](b, `document.querySelector("section#action").textContent.split("temp_c is required").length - 1`); n != 1 {
		t.Errorf("the panel says %q %d times", "temp_c is required", n)
	}
	if eval[bool](b, `[...document.querySelectorAll("section#action .call-error")].some((e) => e.checkVisibility())`) {
		t.Error("the panel repeats the editors' errors")
	}
	if got := eval[string](b, `document.activeElement.name ?? ""`); got != "temp_c" {
		t.Errorf("the focus is on %q, want the field at fault, temp_c", got)
	}
	if inv := eval[string](b, fmt.Sprintf(`document.querySelector(%s).getAttribute("aria-invalid")`, jsString(form+` [name="temp_c"]`))); inv != "true" {
		t.Errorf("temp_c's aria-invalid is %q", inv)
	}

	// Not a number.
	b.typeInto(form+` [name="temp_c"]`, "1e")
	b.click("#submit-results")
	b.waitJS("the form says temp_c must be a number", fieldErrors(form)+`.join("|") === "temp_c must be a number"`, fieldErrors(form))

	// The form is right now; the JSON editor's value is not.
	b.replaceValue(form+` [name="temp_c"]`, "21.5")
	b.replaceValue(js+" textarea.json-editor", `{"temp_c": "warm", "unit": "k"}`)
	b.click("#submit-results")
	b.waitJS("the JSON editor says what is wrong, once per field",
		fieldErrors(js)+`.join("|") === "temp_c must be a number|unit must be one of: c, f"`, fieldErrors(js))
	if errs := eval[[]string](b, fieldErrors(form)); len(errs) != 0 {
		t.Errorf("the corrected form still says %q", errs)
	}
	b.screenshot("form-errors")
	b.replaceValue(js+" textarea.json-editor", `{}`)
	b.click("#submit-results")
	b.waitJS("the JSON editor says both are required",
		fieldErrors(js)+`.join("|") === "temp_c is required|unit is required"`, fieldErrors(js))
	if n := len(u.fake.Requests()); n != 1 {
		t.Fatalf("the model got %d requests while the results were wrong, want 1", n)
	}

	// Right, and sent from the keyboard.
	b.replaceValue(js+" textarea.json-editor", `{"temp_c": 19, "unit": "f"}`)
	b.do("press Ctrl+Enter", chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.waitAnyText("the answer shows", answerText, "Thanks for the readings.")
	b.waitStatus("waiting")
	reqs := modelRequests(t, u.fake)
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	for call, want := range map[string]string{"call_form": `{"temp_c":21.5,"unit":"c"}`, "call_json": `{"temp_c":19,"unit":"f"}`} {
		got, _ := toolResult(reqs[1], call)
		var g, w any
		if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(want), &w) != nil || fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("the model got %s for %s, want %s", got, call, want)
		}
	}
}
