package browsertest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/parleybin"
)

// visibleAlerts is a JavaScript expression: the ids (or classes) of the
// error messages (role=alert) the page shows.
const visibleAlerts = `[...document.querySelectorAll("[role=alert]")].filter((e) => e.checkVisibility() && e.textContent.trim() !== "").map((e) => (e.id || e.className) + ": " + e.textContent.trim())`

// TestBrowserAnsweredElsewhere: another client answers the dynamic tool
// call the open chat shows a form for; the UI's own answer then gets a
// 409, which it says as "Someone else answered first.", and the result is
// stored once, the other client's.
//
// To make that deterministic, the chat's event stream is held by the
// browser itself: the DevTools Fetch domain pauses the stream's request
// before it leaves, so the page shows the form from its GET of the chat
// and cannot learn of the answer until the test lets the request go. The
// owner feed is not held, so the list tells when the chat moved on.
func TestBrowserAnsweredElsewhere(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)
	// The refused answer: the browser logs the 409 itself.
	b.allow(`^browser log \(network, error\): Failed to load resource: the server responded with a status of 409 `)

	u.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_e1", Name: "get_weather", Args: `{"city":"Rome"}`}}},
		llmtest.Turn{Text: "Rome is sunny, the other client says."},
	)
	const schema = `{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`
	b.signIn(u)
	// The stream is held in this tab: it must be the tab's own, not the
	// shared worker's.
	eval[chromedp.Void](b, `localStorage.setItem("parley.streams", "per-tab")`)
	b.do("reload", chromedp.Reload())
	id := u.createChat(t, `{"title": "answered elsewhere", "message": "What is the weather?",
		"dynamic_tools": [{"name": "get_weather", "description": "The weather of a city",
			"input_schema": `+schema+`, "output_schema": `+schema+`}]}`)
	b.waitListStatus(id, "requires_action")

	paused := make(chan fetch.RequestID, 8)
	if err := chromedp.Listen(b.ctx, func(ev any) {
		if ev, ok := ev.(*fetch.EventRequestPaused); ok {
			select {
			case paused <- ev.RequestID:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "*/api/v1/chats/" + id + "/stream*", RequestStage: fetch.RequestStageRequest},
	}}); err != nil {
		t.Fatal(err)
	}
	b.navigate(u.chatURL(id))
	b.visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, id))
	var stream fetch.RequestID
	select {
	case stream = <-paused:
	case <-b.ctx.Done():
		b.fail("the chat's stream was not requested within %s", browserTimeout)
	}
	call := callForm("client", "call_e1")
	b.visible(call + ` [name="city"]`)
	b.waitStatus("requires_action")
	if st := eval[string](b, `document.querySelector("#stream-state").dataset.state`); st != "connecting" {
		t.Errorf("the held stream's state is %q, want connecting", st)
	}
	// The chat read says the call waits for a result: so does its card,
	// without the stream's help.
	b.visible(toolCard("call_e1"))
	if st := eval[string](b, fmt.Sprintf(`document.querySelector(%s).dataset.state`, jsString(toolCard("call_e1")))); st != "waiting" {
		t.Errorf("the card of the call the form answers is %q, want waiting", st)
	}

	code, body := do(t, http.MethodPost, u.URL+"/api/v1/chats/"+id+"/tool-results", u.Token,
		`{"results": [{"tool_call_id": "call_e1", "output": {"city": "Rome"}}]}`)
	if code != http.StatusOK {
		t.Fatalf("the other client's results: %d %s", code, body)
	}
	b.waitListStatus(id, "waiting")
	if !eval[bool](b, fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(call))) {
		t.Fatal("the form went away although the chat's stream is held")
	}

	b.typeInto(call+` [name="city"]`, "Milan")
	b.click("#submit-results")
	b.waitText("the UI says the call was answered elsewhere", "#action-notice", `t.startsWith("Someone else answered first.")`)
	if alerts := eval[[]string](b, visibleAlerts); len(alerts) != 0 {
		t.Errorf("besides the notice, the page shows the errors %q", alerts)
	}
	// The page reads the chat again after the 409, so the panel goes
	// although the stream is still held, and the notice stays.
	b.do("wait for the action panel to go", chromedp.WaitNotVisible(chromedp.CSS("section#action")))
	b.waitStatus("waiting")
	b.waitText("the notice stays", "#action-notice", `t.startsWith("Someone else answered first.")`)
	b.screenshot("answered-elsewhere")

	// Let the stream go: the chat follows what the other client did.
	if _, err := chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: stream}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(b.ctx, fetch.Disable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	b.waitAnyText("the answer to the other client's result shows", answerText, "Rome is sunny, the other client says.")
	b.waitStatus("waiting")
	b.do("wait for the action panel to go", chromedp.WaitNotVisible(chromedp.CSS("section#action")))
	b.waitText("the call's card shows the other client's result", toolCard("call_e1")+" .tool-output", `t.includes("Rome")`)
	if alerts := eval[[]string](b, visibleAlerts); len(alerts) != 0 {
		t.Errorf("the page shows the errors %q", alerts)
	}

	var results []string
	for _, m := range u.getMessages(t, id) {
		for _, p := range m.Parts {
			if p.Type == chat.PartToolResult && p.ToolCallID == "call_e1" {
				results = append(results, string(p.Output))
			}
		}
	}
	if len(results) != 1 || !strings.Contains(results[0], "Rome") {
		t.Errorf("the history has the results %q for call_e1, want the other client's only", results)
	}
	if n := len(u.fake.Requests()); n != 2 {
		t.Errorf("the model got %d requests, want 2", n)
	}
}

// TestBrowserQueuedAndRetryNotice: a message sent while the chat runs
// shows as queued, also after a reload, then moves into the history once
// and is answered; a model call that fails retryably shows the retry
// notice while the next attempt is held, and the notice goes when the
// answer comes.
func TestBrowserQueuedAndRetryNotice(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	gate, started := make(chan struct{}), make(chan struct{})
	u.fake.Push(
		llmtest.Turn{Text: "the first answer", Gate: gate, GateAfter: 2, Started: started},
		llmtest.Turn{Text: "the answer to the queued message"},
	)
	id := u.createChat(t, `{"title": "queue", "message": "first question"}`)
	b.openChat(u, id)
	b.waitClosed("the model is called", started)
	b.waitStatus("running")

	const queued = `#messages li.msg.queued`
	b.typeInto("#composer-input", "second question\r")
	b.waitCount("the message sent while the chat runs shows as queued", queued, 1)
	b.waitText("it is labelled queued", queued+" .queued-label", `t.trim() === "queued"`)
	if got := b.text(queued); !strings.Contains(got, "second question") {
		t.Errorf("the queued message says %q", got)
	}
	if !eval[bool](b, `document.querySelector("#messages").lastElementChild.matches("li.msg.queued")`) {
		t.Error("the queued message is not shown last")
	}
	code, body := get(t, u.URL+"/api/v1/chats/"+id+"/queued", u.Token)
	if code != http.StatusOK || strings.Count(body, "second question") != 1 {
		t.Errorf("GET queued: %d %s", code, body)
	}

	b.do("reload", chromedp.Reload())
	b.visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, id))
	b.waitCount("after a reload the message still shows as queued", queued, 1)
	b.waitText("after a reload it is labelled queued", queued+" .queued-label", `t.trim() === "queued"`)
	if got := b.text(queued); !strings.Contains(got, "second question") {
		t.Errorf("after a reload the queued message says %q", got)
	}
	if n := b.count(userMsg); n != 1 {
		t.Errorf("after a reload %d user messages are in the history, want 1", n)
	}
	b.screenshot("queued")

	close(gate)
	b.waitAnyText("the queued message is answered", answerText, "the answer to the queued message")
	b.waitStatus("waiting")
	b.waitGone("nothing is queued any more", queued)
	users := eval[[]string](b, fmt.Sprintf(`[...document.querySelectorAll(%s)].map((e) => e.textContent)`, jsString(userMsg)))
	if len(users) != 2 || !strings.Contains(users[0], "first question") || !strings.Contains(users[1], "second question") {
		t.Errorf("the user messages shown are %q, want the first question then the second, once each", users)
	}
	if n := b.count(answerText); n != 2 {
		t.Errorf("%d answers shown, want 2", n)
	}

	// A retryable failure, then a held attempt.
	gate, started = make(chan struct{}), make(chan struct{})
	u.fake.Push(
		llmtest.Turn{Status: http.StatusServiceUnavailable},
		llmtest.Turn{Text: "the answer after a retry", Gate: gate, Started: started},
	)
	b.typeInto("#composer-input", "third question\r")
	b.waitClosed("the model is called again after the failure", started)
	b.visible("#retry-notice")
	b.waitText("the notice says which attempt runs", "#retry-notice", `t.includes("attempt 2")`)
	b.waitStatus("running")
	b.screenshot("retry-notice")
	close(gate)
	b.waitAnyText("the answer after the retry shows", answerText, "the answer after a retry")
	b.do("wait for the retry notice to go", chromedp.WaitNotVisible(chromedp.CSS("#retry-notice")))
	b.waitStatus("waiting")
	if eval[bool](b, `document.querySelector("#chat-error").checkVisibility()`) {
		t.Error("the chat shows an error after a successful retry")
	}
	if c := u.getChat(t, id); c.Status != chat.Waiting || c.LastError != nil {
		t.Errorf("through the API the chat is %s with the error %+v", c.Status, c.LastError)
	}
	if n := len(u.fake.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4", n)
	}
}

// waitConnections waits until both live streams of the page, the owner feed
// and the open chat's, say state.
func (b *browser) waitConnections(state string) {
	b.t.Helper()
	b.waitJS("the feed and the chat's stream are "+state,
		fmt.Sprintf(`document.querySelector("#feed-state").dataset.state === %[1]s && document.querySelector("#stream-state").dataset.state === %[1]s`, jsString(state)),
		`document.querySelector("#feed-state").dataset.state + " / " + document.querySelector("#stream-state").dataset.state`)
}

// restart starts serve again, as startUI did, listening on addr. The
// server it replaces must have ended; startUI's cleanup stops the new one.
func (u *uiServer) restart(t *testing.T, addr string) {
	t.Helper()
	s := parleybin.Start(t, command(u.dir, u.env, append(append([]string{"serve"}, u.args...), "--listen", addr)...), deadline)
	s.Token = u.Token
	u.server = s
	l, ok := s.Stdout.WaitLine("parley listening on http://", s.Exited, deadline)
	if !ok {
		t.Fatalf("the restarted serve printed no address\nstdout:\n%s\nstderr:\n%s", s.Stdout, s.Stderr)
	}
	if s.URL = strings.TrimPrefix(l, "parley listening on "); s.URL != "http://"+addr {
		t.Fatalf("the restarted serve listens on %s, want http://%s", s.URL, addr)
	}
}

// TestBrowserReconnects: when serve goes away, the owner feed and the open
// chat's stream say they are reconnecting; once serve is back on the same
// address they reconnect by themselves, without a reload, and show what
// happens next without repeating what was shown before.
func TestBrowserReconnects(t *testing.T) {
	t.Parallel()
	u := startUI(t)
	b := newBrowser(t, desktop)
	// The streams' attempts while serve is down.
	b.allow(`^browser log \(network, error\): Failed to load resource: net::ERR_CONNECTION_REFUSED `)

	u.fake.Push(llmtest.Turn{Text: "the answer before the restart"})
	id := u.createChat(t, `{"title": "reconnects", "message": "before"}`)
	b.openChat(u, id)
	b.waitAnyText("the answer shows", answerText, "the answer before the restart")
	b.waitStatus("waiting")
	b.waitConnections("connected")
	eval[chromedp.Void](b, `window.__sameDocument = true`)

	addr := strings.TrimPrefix(u.URL, "http://")
	if code := u.Stop(); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM\nstderr:\n%s", code, u.Stderr)
	}
	b.waitConnections("connecting")
	b.screenshot("reconnecting")
	u.restart(t, addr)
	b.waitConnections("connected")

	u.fake.Push(llmtest.Turn{Text: "the answer after the restart"})
	if code, body := do(t, http.MethodPost, u.URL+"/api/v1/chats/"+id+"/messages", u.Token, `{"message": "after"}`); code != http.StatusAccepted {
		t.Fatalf("POST message after the restart: %d %s", code, body)
	}
	b.waitAnyText("the answer after the restart shows", answerText, "the answer after the restart")
	b.waitStatus("waiting")
	other := u.createChat(t, `{"title": "made after the restart"}`)
	b.waitText("a chat made after the restart is listed", chatItem(other)+" .chat-title", `t.trim() === "made after the restart"`)

	msgs := u.getMessages(t, id)
	var want []string
	for _, m := range msgs {
		want = append(want, fmt.Sprint(m.ID))
	}
	shown := eval[[]string](b, `[...document.querySelectorAll("#messages li.msg[data-message-id]")].map((e) => e.dataset.messageId)`)
	if strings.Join(shown, ",") != strings.Join(want, ",") {
		t.Errorf("the page shows the messages %q, want the history's %q, each once", shown, want)
	}
	if n := b.count(`#messages li.msg.draft`); n != 0 {
		t.Errorf("%d drafts left", n)
	}
	if n := b.count(chatItem(id)); n != 1 {
		t.Errorf("the chat is listed %d times", n)
	}
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Error("the page was reloaded")
	}
	if n := len(u.fake.Requests()); n != 2 {
		t.Errorf("the model got %d requests, want 2", n)
	}
}
