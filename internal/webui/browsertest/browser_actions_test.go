package browsertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// toolCard is the card of a tool call in the messages.
func toolCard(id string) string {
	return fmt.Sprintf(`#messages .tool-card[data-tool-call-id="%s"]`, id)
}

// callForm is the fieldset of the action panel that answers a call.
func callForm(kind, id string) string {
	return fmt.Sprintf(`section#action fieldset.call[data-kind=%s][data-tool-call-id="%s"]`, kind, id)
}

// toolResult is the content of the tool message answering call in a
// model request, "" if it has none.
func toolResult(req modelRequest, call string) (string, bool) {
	for _, m := range req.Messages {
		if m.Role == "tool" && m.ToolCallID == call {
			var s string
			if json.Unmarshal(m.Content, &s) != nil {
				s = string(m.Content) // content parts
			}
			return s, true
		}
	}
	return "", false
}

// TestBrowserDynamicToolForm: a dynamic tool's call is answered through
// the form the UI makes from the tool's output schema, and the model gets
// what was entered, with the integer as a number.
func TestBrowserDynamicToolForm(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	u.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w1", Name: "get_weather", Args: `{"city":"Paris","days":2}`}}},
		llmtest.Turn{Text: "Sunny in Lyon for the next 3 days."},
	)
	const schema = `{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}`
	id := u.createChat(t, `{"title": "weather", "message": "What is the weather?",
		"dynamic_tools": [{"name": "get_weather", "description": "The weather of a city",
			"input_schema": `+schema+`, "output_schema": `+schema+`}]}`)
	b.openChat(u, id)

	call := callForm("client", "call_w1")
	b.visible(call)
	if n := b.count("section#action form#tool-results-form fieldset.call"); n != 1 {
		t.Errorf("the results form has %d calls, want 1", n)
	}
	b.waitStatus("requires_action")
	if legend := strings.TrimSpace(b.text(call + " legend")); legend != "get_weather" {
		t.Errorf("the call's legend is %q, want get_weather", legend)
	}
	b.visible(call + ` [name="city"]`)
	b.visible(call + ` [name="days"]`)
	if typ := eval[string](b, fmt.Sprintf(`document.querySelector(%s).type`, jsString(call+` [name="days"]`))); typ != "number" {
		t.Errorf("the integer property's input has type %q, want number", typ)
	}
	b.typeInto(call+` [name="city"]`, "Lyon")
	b.typeInto(call+` [name="days"]`, "3")
	b.screenshot("tool-form")
	b.click("#submit-results")

	b.waitAnyText("the answer shows", answerText, "Sunny in Lyon for the next 3 days.")
	b.waitStatus("waiting")
	b.do("wait for the action panel to go", chromedp.WaitNotVisible(chromedp.CSS("section#action")))
	b.waitText("the call's card shows the result", toolCard("call_w1")+" .tool-output", `t.includes("Lyon")`)

	reqs := modelRequests(t, u.fake)
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	res, ok := toolResult(reqs[1], "call_w1")
	if !ok {
		t.Fatalf("the second model request has no result for call_w1: %+v", reqs[1].Messages)
	}
	var out struct {
		City string `json:"city"`
		Days any    `json:"days"`
	}
	if err := json.Unmarshal([]byte(res), &out); err != nil || out.City != "Lyon" || out.Days != float64(3) {
		t.Errorf("the model got the result %s, want {\"city\":\"Lyon\",\"days\":3}", res)
	}
	b.screenshot("tool-answered")
}

// TestBrowserApproval: a call that needs approval is approved with edited
// arguments, and runs with them; a second one is denied with a reason,
// which the card and the model see.
func TestBrowserApproval(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	u.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_t1", Name: "current_time", Args: `{"timezone":"UTC"}`}}},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_t2", Name: "current_time", Args: `{"timezone":"Asia/Tokyo"}`}}},
		llmtest.Turn{Text: "That is all the time I needed."},
	)
	id := u.createChat(t, `{"title": "approvals", "message": "What time is it?", "approve": ["current_time"]}`)
	b.openChat(u, id)

	first := callForm("approval", "call_t1")
	b.visible(first + " textarea.args-editor")
	b.waitStatus("requires_action")
	if args := eval[string](b, fmt.Sprintf(`document.querySelector(%s).value`, jsString(first+" textarea.args-editor"))); !strings.Contains(args, `"UTC"`) {
		t.Errorf("the arguments editor holds %q, want the model's arguments", args)
	}
	b.replaceValue(first+" textarea.args-editor", `{"timezone": "Europe/Paris"}`)
	b.screenshot("approval-edited")
	b.click(first + " button.approve")

	b.waitText("the approved call ran with the edited arguments", toolCard("call_t1")+" .tool-output", `t.includes("Europe/Paris")`)
	b.waitText("the card shows the approval", toolCard("call_t1")+" .tool-decision", `/approved/i.test(t)`)

	second := callForm("approval", "call_t2")
	b.visible(second + " input.reason")
	b.typeInto(second+" input.reason", "not now")
	b.click(second + " button.deny")
	b.waitText("the card shows the denial and its reason", toolCard("call_t2")+" .tool-decision", `/denied/i.test(t) && t.includes("not now")`)

	b.waitAnyText("the answer shows", answerText, "That is all the time I needed.")
	b.waitStatus("waiting")
	reqs := modelRequests(t, u.fake)
	if len(reqs) != 3 {
		t.Fatalf("the model got %d requests, want 3", len(reqs))
	}
	if res, _ := toolResult(reqs[1], "call_t1"); !strings.Contains(res, "Europe/Paris") {
		t.Errorf("the model got the result %q for the approved call, want Europe/Paris's time", res)
	}
	if res, _ := toolResult(reqs[2], "call_t2"); !strings.Contains(res, "denied: not now") {
		t.Errorf("the model got the result %q for the denied call, want \"denied: not now\"", res)
	}
	b.screenshot("approval-done")
}

// TestBrowserInterruptAndRetry stops a run the model holds, then shows a
// failed run's error: a refused request (not retryable) offers no Retry, a
// model that stays unavailable does, and Retry runs the chat again.
func TestBrowserInterruptAndRetry(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	gate, started, gone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(gate) }) // never opened before: only the interrupt ends the turn
	u.fake.Push(llmtest.Turn{Text: "a slow answer that never ends", Gate: gate, GateAfter: 3, Started: started, Gone: gone})
	id := u.createChat(t, `{"title": "interrupt", "message": "take your time"}`)
	b.openChat(u, id)
	b.waitClosed("the model is called", started)
	b.waitStatus("running")
	b.do("wait for Stop to be enabled", chromedp.WaitEnabled(chromedp.CSS("#interrupt")))
	b.click("#interrupt")
	b.waitClosed("the model call is cancelled", gone)
	b.waitStatus("waiting")
	b.waitGone("no draft is left", `#messages li.msg.draft`)
	if eval[bool](b, `!document.querySelector("#interrupt").disabled`) {
		t.Error("Stop is enabled on a waiting chat")
	}

	u.fake.Push(llmtest.Turn{Status: 400, ErrorMessage: "the fake refuses this request"})
	b.typeInto("#composer-input", "and now?\r")
	b.visible("#chat-error")
	b.waitStatus("error")
	b.waitText("the error says what failed", "#chat-error .error-message", `t.includes("the fake refuses this request")`)
	code, body := get(t, u.URL+"/api/v1/chats/"+id, u.Token)
	var c chat.Chat
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil || c.LastError == nil || c.LastError.Kind == "" {
		t.Fatalf("the chat through the API: %d %s", code, body)
	}
	if kind := strings.TrimSpace(b.text("#chat-error .error-kind")); kind != c.LastError.Kind {
		t.Errorf("the error's kind shows as %q, want the chat's %q", kind, c.LastError.Kind)
	}
	if c.LastError.Retryable {
		t.Fatalf("the refused request's error is retryable: %+v", c.LastError)
	}
	if b.visibleCount("#retry") != 0 {
		t.Error("Retry is offered for an error that is not retryable")
	}
	b.screenshot("error")

	// Every attempt finds the model unavailable: retryable, Retry shows.
	for range 4 {
		u.fake.Push(llmtest.Turn{Status: http.StatusServiceUnavailable})
	}
	b.typeInto("#composer-input", "and once more?\r")
	b.visible("#retry") // hidden until the new, retryable, error
	b.waitStatus("error")
	if c := u.getChat(t, id); c.LastError == nil || !c.LastError.Retryable {
		t.Fatalf("the unavailable model's error is not retryable: %+v", c.LastError)
	}

	u.fake.Push(llmtest.Turn{Text: "the answer after the retry"})
	b.click("#retry")
	b.waitAnyText("the retried run answers", answerText, "the answer after the retry")
	b.waitStatus("waiting")
	b.do("wait for the error to go", chromedp.WaitNotVisible(chromedp.CSS("#chat-error")))
	if n := len(u.fake.Requests()); n != 7 {
		t.Errorf("the model got %d requests, want 7 (interrupted, refused, four unavailable, retried)", n)
	}
	b.screenshot("retried")
}
