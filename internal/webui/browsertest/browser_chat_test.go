package browsertest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// Selectors of the DOM contract the tests read often.
const (
	draftText    = `#messages li.msg.draft[data-role=assistant] .msg-text`
	answerText   = `#messages li.msg[data-role=assistant][data-message-id] .msg-text`
	assistantMsg = `#messages li.msg[data-role=assistant]`
	userMsg      = `#messages li.msg[data-role=user][data-message-id]`
)

// chatItem is the chat list's entry of a chat.
func chatItem(id string) string {
	return fmt.Sprintf(`#chat-list li.chat-item[data-chat-id="%s"]`, id)
}

// waitStatus waits until the open chat's status badge says status.
func (b *browser) waitStatus(status string) {
	b.t.Helper()
	b.waitJS("the chat's status is "+status,
		fmt.Sprintf(`document.querySelector("#chat-status")?.dataset.status === %s`, jsString(status)),
		`document.querySelector("#chat-status")?.dataset.status ?? "(no #chat-status)"`)
}

// waitAnyText waits until one of the elements sel matches has a text
// content that contains want.
func (b *browser) waitAnyText(what, sel, want string) {
	b.t.Helper()
	all := fmt.Sprintf(`[...document.querySelectorAll(%s)].map((e) => e.textContent)`, jsString(sel))
	b.waitJS(what, fmt.Sprintf(`%s.some((t) => t.includes(%s))`, all, jsString(want)), all)
}

// waitClosed waits until the fake closes ch (Started, Gone).
func (b *browser) waitClosed(what string, ch <-chan struct{}) {
	b.t.Helper()
	select {
	case <-ch:
	case <-b.ctx.Done():
		b.fail("%s: not within %s", what, browserTimeout)
	}
}

// TestBrowserLoginAndLiveList signs in with the link serve prints, which
// leaves no token in the address bar, and sees chats another client
// creates and runs appear and change in the list, without a reload.
func TestBrowserLoginAndLiveList(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	if !strings.Contains(u.link, "#token="+u.Token) {
		t.Errorf("the sign-in link %q does not carry the token", u.link)
	}
	b.signIn(u)
	if hash := eval[string](b, `location.hash`); strings.Contains(hash, "token") {
		t.Errorf("after sign-in the address bar's fragment is %q, still with the token", hash)
	}
	if href := eval[string](b, `location.href`); strings.Contains(href, u.Token) {
		t.Errorf("after sign-in the address bar holds the token: %s", href)
	}
	hist, err := chromedp.Run(b.ctx, chromedp.NavigationEntries())
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Entries) == 0 {
		t.Error("the browser has no history entry")
	}
	for _, e := range hist.Entries {
		if strings.Contains(e.URL, u.Token) {
			t.Errorf("the browser's history keeps the token: %s", e.URL)
		}
	}
	b.waitJS("the owner feed is connected", `document.querySelector("#feed-state")?.dataset.state === "connected"`,
		`document.querySelector("#feed-state")?.outerHTML ?? "(no #feed-state)"`)
	// Set on this document: still there at the end, so nothing reloaded.
	eval[chromedp.Void](b, `window.__sameDocument = true`)

	id := u.createChat(t, `{"title": "made by another client"}`)
	b.visible(chatItem(id))
	b.waitText("the new chat's title in the list", chatItem(id)+" .chat-title", `t.trim() === "made by another client"`)
	if st := eval[string](b, fmt.Sprintf(`document.querySelector(%s).dataset.status`, jsString(chatItem(id)))); st != "waiting" {
		t.Errorf("the new chat is listed as %q, want waiting", st)
	}
	if href := eval[string](b, fmt.Sprintf(`document.querySelector(%s).getAttribute("href")`, jsString(chatItem(id)+" a"))); href != "#/chats/"+id {
		t.Errorf("the list entry links to %q, want #/chats/%s", href, id)
	}

	// A chat that runs: its entry follows its status.
	gate, started := make(chan struct{}), make(chan struct{})
	u.fake.Push(llmtest.Turn{Text: "an answer nobody in the browser asked for", Gate: gate, Started: started})
	running := u.createChat(t, `{"title": "running elsewhere", "message": "hello from curl"}`)
	b.waitClosed("the model is called", started)
	b.waitJS("the running chat is listed as running",
		fmt.Sprintf(`document.querySelector(%s)?.dataset.status === "running"`, jsString(chatItem(running))),
		fmt.Sprintf(`document.querySelector(%s)?.outerHTML ?? "(not listed)"`, jsString(chatItem(running))))
	if first := eval[string](b, `document.querySelector("#chat-list li.chat-item")?.dataset.chatId ?? ""`); first != running {
		t.Errorf("the list starts with chat %q, want the newest, %s", first, running)
	}
	b.screenshot("live-list-running")
	close(gate)
	b.waitJS("the chat is listed as waiting once answered",
		fmt.Sprintf(`document.querySelector(%s)?.dataset.status === "waiting"`, jsString(chatItem(running))),
		fmt.Sprintf(`document.querySelector(%s)?.outerHTML`, jsString(chatItem(running))))
	if badge := eval[string](b, fmt.Sprintf(`document.querySelector(%s)?.dataset.status ?? ""`, jsString(chatItem(running)+" .status-badge"))); badge != "waiting" {
		t.Errorf("the entry's status badge says %q, want waiting", badge)
	}
	if !eval[bool](b, `window.__sameDocument === true`) {
		t.Error("the page was reloaded")
	}
	b.screenshot("live-list")
}

// TestBrowserLoginForm, at a phone's width: without a stored token the
// sign-in form shows, a wrong token is refused with a message, the right
// one signs in, a reload stays signed in, and an open chat takes the
// phone's whole width.
func TestBrowserLoginForm(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, phone)
	// The refused token's request: the browser logs the 401 itself.
	b.allow(`^browser log \(network, error\): Failed to load resource: the server responded with a status of 401 `)

	b.navigate(u.URL + "/")
	b.visible("form#login")
	b.visible("#login-token")
	if signed := eval[string](b, `document.body.dataset.signedIn ?? ""`); signed == "true" {
		t.Error("a fresh browser is signed in")
	}
	if typ := eval[string](b, `document.querySelector("#login-token").type`); typ != "password" {
		t.Errorf("the token field's type is %q, want password", typ)
	}
	b.typeInto("#login-token", "prl_0000000000000000_notthetoken")
	b.click(`form#login button[type=submit]`)
	b.visible("#login-error")
	b.waitText("the refusal is explained", "#login-error", `t.trim() !== ""`)
	if signed := eval[string](b, `document.body.dataset.signedIn ?? ""`); signed == "true" {
		t.Error("signed in with a wrong token")
	}
	if stored := eval[string](b, `localStorage.getItem("parley.token") ?? ""`); stored != "" {
		t.Errorf("the refused token was stored: %q", stored)
	}
	b.screenshot("login-refused-phone")

	b.replaceValue("#login-token", "")
	b.typeInto("#login-token", u.Token)
	b.click(`form#login button[type=submit]`)
	b.waitJS("the right token signs in", `document.body.dataset.signedIn === "true"`, `document.body.dataset.signedIn`)
	b.do("wait for the login form to go", chromedp.WaitNotVisible(chromedp.CSS("form#login")))
	if stored := eval[string](b, `localStorage.getItem("parley.token") ?? ""`); stored != u.Token {
		t.Errorf("localStorage parley.token is %q, want the token signed in with", stored)
	}
	if w := eval[int](b, `document.documentElement.scrollWidth`); w > phone.width {
		t.Errorf("the signed-in page is %d px wide, wider than the phone's %d", w, phone.width)
	}
	b.screenshot("signed-in-phone")

	b.do("reload", chromedp.Reload())
	b.waitJS("a reload stays signed in", `document.body.dataset.signedIn === "true"`, `document.body.dataset.signedIn`)
	if eval[bool](b, `document.querySelector("form#login").checkVisibility()`) {
		t.Error("the login form shows after a reload with a stored token")
	}

	// An open chat takes the phone's whole width, not a column of it.
	id := u.createChat(t, `{"title": "on a phone"}`)
	b.navigate(u.chatURL(id))
	b.visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, id))
	b.visible("#composer-input")
	if w := eval[float64](b, `document.querySelector("main#chat").getBoundingClientRect().width`); w < float64(phone.width)-1 {
		t.Errorf("the open chat is %.0f px wide on a %d px phone, want all of it", w, phone.width)
	}
	if w := eval[float64](b, `document.querySelector("#composer-input").getBoundingClientRect().width`); w < float64(phone.width)/2 {
		t.Errorf("the message box is %.0f px wide on a %d px phone", w, phone.width)
	}
}

// TestBrowserStreamsAnswer creates a chat in the UI, sends a message with
// Enter, sees the answer stream in as a draft while the model is held
// mid-answer, and the durable answer replace it.
func TestBrowserStreamsAnswer(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)
	b.signIn(u)

	b.click("#new-chat")
	b.visible("dialog#new-chat-dialog")
	b.typeInto("#new-title", "streaming test")
	b.click("#new-create")
	b.do("wait for the dialog to close", chromedp.WaitNotVisible(chromedp.CSS("dialog#new-chat-dialog")))
	b.visible("main#chat")
	id := eval[string](b, `document.querySelector("main#chat").dataset.chatId ?? ""`)
	if hash := eval[string](b, `location.hash`); id == "" || hash != "#/chats/"+id {
		t.Fatalf("after Create the chat open is %q and the address #%q", id, hash)
	}
	b.visible(chatItem(id))

	const answer = "The quick brown fox jumps over the lazy dog, twice over."
	const partial = "The quick br" // 3 deltas of 4 runes, after the role chunk
	gate, started := make(chan struct{}), make(chan struct{})
	u.fake.Push(llmtest.Turn{Text: answer, ChunkSize: 4, Gate: gate, GateAfter: 4, Started: started})
	b.typeInto("#composer-input", "hello there\r")
	b.waitClosed("the model is called", started)
	b.waitText("the draft shows what has streamed", draftText, fmt.Sprintf(`t.includes(%s)`, jsString(partial)))
	if got := strings.TrimSpace(b.text(draftText)); got != partial {
		t.Errorf("the draft says %q while the model is held after %q", got, partial)
	}
	b.waitStatus("running")
	b.waitAnyText("the user's message shows", userMsg, "hello there")
	if v := eval[string](b, `document.querySelector("#composer-input").value`); v != "" {
		t.Errorf("the composer still holds %q after sending", v)
	}
	b.screenshot("streaming-draft")

	close(gate)
	b.waitText("the durable answer shows", answerText, fmt.Sprintf(`t.trim() === %s`, jsString(answer)))
	b.waitGone("the draft is replaced", `#messages li.msg.draft`)
	b.waitStatus("waiting")
	if n := b.count(assistantMsg); n != 1 {
		t.Errorf("%d assistant messages shown, want 1", n)
	}
	if n := b.count(userMsg); n != 1 {
		t.Errorf("%d user messages shown, want 1", n)
	}
	reqs := modelRequests(t, u.fake)
	if len(reqs) != 1 {
		t.Fatalf("the model got %d requests, want 1", len(reqs))
	}
	if m := reqs[0].Messages; len(m) == 0 || m[len(m)-1].Role != "user" || !strings.Contains(string(m[len(m)-1].Content), "hello there") {
		t.Errorf("the model was not asked the message sent: %+v", m)
	}
	b.screenshot("answered")
}

// TestBrowserModelHTMLIsText: HTML in a model's answer, as a block or
// inline, is shown as text and never run; the Markdown around it is
// rendered, and code is highlighted.
func TestBrowserModelHTMLIsText(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	const block = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`
	const inline = `<img src=y onerror="window.__pwned=3">`
	answer := block + "\n\nSome **bold** text and an inline " + inline + " image.\n\n" +
		"```go\nfunc main() { println(\"hi\") }\n```\n"
	const thinking = "The user wants HTML; <b>show</b> it as text."
	u.fake.Push(llmtest.Turn{Reasoning: thinking, Text: answer})
	id := u.createChat(t, `{"title": "html test", "message": "show me some HTML"}`)
	b.openChat(u, id)
	b.waitAnyText("the answer shows", answerText, "Some bold text")
	b.waitStatus("waiting")

	if pwned := eval[string](b, `typeof window.__pwned`); pwned != "undefined" {
		t.Errorf("the model's HTML ran: window.__pwned is %s", eval[string](b, `String(window.__pwned)`))
	}
	for _, sel := range []string{"#messages script", "#messages img", "#messages [onerror]", "#messages iframe"} {
		if n := b.count(sel); n != 0 {
			t.Errorf("%d elements %s in the messages", n, sel)
		}
	}
	text := b.text(answerText)
	for _, want := range []string{block, inline} {
		if !strings.Contains(text, want) {
			t.Errorf("the answer does not show %s as text; it says %q", want, text)
		}
	}
	if got := b.text(answerText + " strong"); got != "bold" {
		t.Errorf("**bold** rendered as <strong>%s</strong>, want bold", got)
	}
	if n := b.count(answerText + " pre code.hljs"); n != 1 {
		t.Errorf("%d highlighted code blocks (pre code.hljs), want 1", n)
	}
	if code := b.text(answerText + " pre code"); !strings.Contains(code, `func main() { println("hi") }`) {
		t.Errorf("the code block says %q", code)
	}
	if n := b.count(answerText + " pre code .hljs-keyword"); n == 0 {
		t.Error("the Go code has no highlighted keyword")
	}
	// The reasoning is shown collapsed, as text, and opens on a click.
	const reasoning = `#messages li.msg[data-role=assistant][data-message-id] details.reasoning`
	if got := b.text(reasoning + " .reasoning-text"); got != thinking {
		t.Errorf("the reasoning says %q, want %q", got, thinking)
	}
	if open := eval[bool](b, `document.querySelector('`+reasoning+`').open`); open {
		t.Error("the reasoning of a finished answer is shown open")
	}
	b.click(reasoning + " summary")
	b.waitJS("the reasoning opens", `document.querySelector('`+reasoning+`').open`, "")
	b.screenshot("model-html")
}

// TestBrowserReloadMidStream reloads the page while the model is held
// mid-answer: the draft shows what has streamed once, not twice, and the
// answer arrives once.
func TestBrowserReloadMidStream(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	const answer = "Streaming survives a reload of the page."
	const partial = "Streaming su"
	gate, started := make(chan struct{}), make(chan struct{})
	u.fake.Push(llmtest.Turn{Text: answer, ChunkSize: 4, Gate: gate, GateAfter: 4, Started: started})
	id := u.createChat(t, `{"title": "reload test", "message": "tell me about reloads"}`)
	b.openChat(u, id)
	b.waitClosed("the model is called", started)
	b.waitText("the draft shows what has streamed", draftText, fmt.Sprintf(`t.includes(%s)`, jsString(partial)))

	b.do("reload", chromedp.Reload())
	b.visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, id))
	b.waitText("after the reload the draft shows what has streamed", draftText, fmt.Sprintf(`t.includes(%s)`, jsString(partial)))
	if got := strings.TrimSpace(b.text(draftText)); got != partial {
		t.Errorf("after the reload the draft says %q, want %q once", got, partial)
	}
	if n := b.count(`#messages li.msg.draft`); n != 1 {
		t.Errorf("%d drafts after the reload, want 1", n)
	}
	if n := b.count(userMsg); n != 1 {
		t.Errorf("%d user messages after the reload, want 1", n)
	}
	b.screenshot("reloaded-draft")

	close(gate)
	b.waitText("the durable answer shows", answerText, fmt.Sprintf(`t.trim() === %s`, jsString(answer)))
	b.waitGone("the draft is replaced", `#messages li.msg.draft`)
	b.waitStatus("waiting")
	if n := b.count(assistantMsg); n != 1 {
		t.Errorf("%d assistant messages, want 1", n)
	}
	if n := b.count(userMsg); n != 1 {
		t.Errorf("%d user messages, want 1", n)
	}
	b.screenshot("reloaded-answered")
}
