package browsertest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// answerShown is a JavaScript expression: whether a durable answer shown
// contains text.
func answerShown(text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%s)].some((e) => e.textContent.includes(%s))`, jsString(answerText), jsString(text))
}

// visibleCount is how many elements sel matches that are rendered now.
func (b *browser) visibleCount(sel string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf(`[...document.querySelectorAll(%s)].filter((e) => e.checkVisibility()).length`, jsString(sel)))
}

// sentContains says whether any message of the model request r contains s.
func sentContains(r modelRequest, s string) bool {
	for _, m := range r.Messages {
		if strings.Contains(string(m.Content), s) {
			return true
		}
	}
	return false
}

// TestBrowserEditRegenerateFork edits the question of a chat in the UI
// (the old answer goes while the model is held, the new one arrives),
// regenerates the answer, sees an edit by another client (the stream's
// history event), and forks a new chat from the answer, which opens with
// the copied messages and says it is a fork of the original, with a link
// that opens it. Edit and Regenerate are offered only while the chat is
// idle. The edited question and the regenerated answer carry "‹ k/n ›":
// paging back shows the earlier version read-only, with what followed it,
// in place of the history, also after a reload, and inside an earlier
// version the answer Regenerate wrote again pages too; an edit that
// replaces later turns asks first, saying how many.
func TestBrowserEditRegenerateFork(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)
	u.fake.Push(llmtest.Turn{Text: "The first answer."})
	id := u.createChat(t, `{"title": "edits", "message": "What is two plus two?"}`)
	b.openChat(u, id)
	b.waitJS("the first answer shows", answerShown("The first answer."), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")
	b.visible(userMsg + " button.msg-edit")

	// Edit: the answer after the question goes, and the model is asked the
	// new question.
	gate, started := make(chan struct{}), make(chan struct{})
	u.fake.Push(llmtest.Turn{Text: "The second answer.", Gate: gate, Started: started})
	b.click(userMsg + " button.msg-edit")
	b.replaceValue(userMsg+" textarea.msg-edit-input", "What is three plus three?")
	b.click(userMsg + " button.msg-edit-save")
	b.waitClosed("the model is asked the edited question", started)
	b.waitGone("the old answer is gone", assistantMsg+"[data-message-id]")
	b.waitText("the question is the edited one", userMsg+" .msg-text", `t === "What is three plus three?"`)
	b.waitStatus("running")
	if n := b.visibleCount("button.msg-edit, button.msg-regenerate, #compact"); n != 0 {
		t.Errorf("%d edit, regenerate or compact buttons are offered while the chat runs", n)
	}
	close(gate)
	b.waitJS("the new answer arrives", answerShown("The second answer."), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")
	b.visible(userMsg + " button.msg-edit")
	if n := b.count(userMsg); n != 1 {
		t.Errorf("%d user messages shown after the edit, want 1", n)
	}
	b.waitNav("the edited question has two versions", userMsg, "2/2")
	if n := b.count(assistantMsg + " .versions-nav"); n != 0 {
		t.Errorf("the answer to the edited question shows %d version navigations, want none", n)
	}
	b.pageBack("the earlier question, with its answer", userMsg, "1/2", "What is two plus two?", "The first answer.")
	reqs := modelRequests(t, u.fake)
	if len(reqs) != 2 || !sentContains(reqs[1], "three plus three") || sentContains(reqs[1], "two plus two") || sentContains(reqs[1], "The first answer.") {
		t.Fatalf("the model was not asked the edited question alone: %+v", reqs)
	}

	// Regenerate: the last answer goes and another one arrives.
	gate, started = make(chan struct{}), make(chan struct{})
	u.fake.Push(llmtest.Turn{Text: "The third answer.", Gate: gate, Started: started})
	b.click(assistantMsg + ".last-answer button.msg-regenerate")
	b.waitClosed("the model is asked again", started)
	b.waitGone("the regenerated answer is gone", assistantMsg+"[data-message-id]")
	close(gate)
	b.waitJS("the regenerated answer arrives", answerShown("The third answer."), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")
	if n := b.count(assistantMsg); n != 1 {
		t.Errorf("%d answers shown after regenerating, want 1", n)
	}
	b.waitNav("the regenerated answer has two versions", assistantMsg+".last-answer", "2/2")
	b.pageBack("the earlier answer", assistantMsg+".last-answer", "1/2", "The second answer.")
	// The versions are read back from the server after a reload.
	b.do("reload", chromedp.Reload())
	b.visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, id))
	b.waitJS("the answer shows again", answerShown("The third answer."), `document.querySelector("#messages").textContent`)
	b.waitNav("the question's versions after a reload", userMsg, "2/2")
	b.waitNav("the answer's versions after a reload", assistantMsg+".last-answer", "2/2")
	b.pageBack("the earlier question after a reload", userMsg, "1/2", "What is two plus two?", "The first answer.")
	// A history event is sent only live: the edit below waits for the stream.
	b.waitConnected()
	reqs = modelRequests(t, u.fake)
	if len(reqs) != 3 || !sentContains(reqs[2], "three plus three") || sentContains(reqs[2], "The second answer.") {
		t.Fatalf("the regeneration did not ask the question alone again: %+v", reqs)
	}

	// Another client edits the question: the stream's history event
	// removes the answer and shows the new text.
	gate, started = make(chan struct{}), make(chan struct{})
	u.fake.Push(llmtest.Turn{Text: "The fourth answer.", Gate: gate, Started: started})
	question := eval[string](b, fmt.Sprintf(`document.querySelector(%s).dataset.messageId`, jsString(userMsg)))
	if code, body := do(t, "PATCH", u.URL+"/api/v1/chats/"+id+"/messages/"+question, u.Token, `{"content": "What is four plus four?"}`); code != 200 {
		t.Fatalf("PATCH the question from another client: %d %s", code, body)
	}
	b.waitClosed("the model is asked the other client's question", started)
	b.waitGone("the answer to the old question is gone", assistantMsg+"[data-message-id]")
	b.waitText("the question is the other client's", userMsg+" .msg-text", `t === "What is four plus four?"`)
	close(gate)
	b.waitJS("the answer to it arrives", answerShown("The fourth answer."), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")
	b.waitNav("the question another client edited", userMsg, "3/3")

	// Fork from the answer: a new chat opens with both messages.
	b.click(assistantMsg + ".last-answer button.msg-fork")
	b.waitJS("the fork opens", fmt.Sprintf(`location.hash.startsWith("#/chats/") && location.hash !== %s && document.querySelector("main#chat").dataset.chatId === location.hash.slice(8)`, jsString("#/chats/"+id)),
		`location.hash`)
	forked := eval[string](b, `document.querySelector("main#chat").dataset.chatId`)
	b.waitJS("the fork shows the answer", answerShown("The fourth answer."), `document.querySelector("#messages").textContent`)
	b.waitText("the fork shows the question", userMsg+" .msg-text", `t === "What is four plus four?"`)
	b.waitStatus("waiting")
	b.visible(chatItem(forked))
	b.screenshot("forked")
	if c := u.getChat(t, forked); c.Labels["forked_from"] != id {
		t.Errorf("the fork's labels are %v, want forked_from %s", c.Labels, id)
	}
	if ms := u.getMessages(t, forked); len(ms) != 2 {
		t.Errorf("the fork has %d messages, want 2: %+v", len(ms), ms)
	}
	if n := len(u.fake.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4 (a fork from an answer answers nothing)", n)
	}
	// The fork says so, with a link to the original, in its header and
	// in the list.
	b.waitText("the fork names its origin", "#chat-fork", `t.includes("“edits”")`)
	if href := eval[string](b, `document.querySelector("#chat-fork-link").getAttribute("href")`); href != "#/chats/"+id {
		t.Errorf("the fork's link to its origin is %q", href)
	}
	b.visible(chatItem(forked) + " .tag-fork")

	// An edit that replaces a later turn asks first: the first Save says
	// what goes, and nothing is sent until the second.
	u.fake.Push(llmtest.Turn{Text: "The fifth answer."})
	b.typeInto("#composer-input", "And five plus five?\r")
	b.waitJS("the fifth answer arrives", answerShown("The fifth answer."), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")
	first := userMsg + ":first-of-type"
	b.click(first + " button.msg-edit")
	b.replaceValue(first+" textarea.msg-edit-input", "What is six plus six?")
	b.click(first + " button.msg-edit-save")
	b.waitText("the edit says what it replaces", first+" .msg-edit-confirm", `t.includes("1 later turn")`)
	if n := len(u.fake.Requests()); n != 5 {
		t.Errorf("the model got %d requests before the edit was confirmed, want 5", n)
	}
	u.fake.Push(llmtest.Turn{Text: "The sixth answer."})
	b.click(first + " button.msg-edit-save")
	b.waitJS("the confirmed edit is answered", answerShown("The sixth answer."), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")
	b.waitNav("the fork's edited question", first, "2/2")
	b.pageBack("the replaced turns", first, "1/2", "What is four plus four?", "The fourth answer.", "And five plus five?", "The fifth answer.")

	// The fork's link opens the original.
	b.click("#chat-fork-link")
	b.waitJS("the link opens the original", fmt.Sprintf(`location.hash === %s && document.querySelector("main#chat").dataset.chatId === %s`, jsString("#/chats/"+id), jsString(id)), `location.hash`)
	b.waitText("the original's title", "#chat-title", `t === "edits"`)
	b.waitNav("the original's question", userMsg, "3/3")
	if b.visibleCount("#chat-fork") != 0 {
		t.Errorf("the original says it is a fork")
	}
	// Inside an earlier version, the answer Regenerate wrote again pages
	// too, and the question pages on to its next version.
	b.click(userMsg + " .version-prev")
	b.waitNav("the second question", branchSel+" li.msg", "2/3")
	b.waitBranch("the second question, with its last answer", "What is three plus three?", "The third answer.")
	const oldAnswer = branchSel + ` li.msg.old[data-old-role="assistant"]`
	b.waitNav("the answers to the second question", oldAnswer, "2/2")
	b.click(oldAnswer + " .version-prev")
	b.waitBranch("the second question, with its first answer", "What is three plus three?", "The second answer.")
	b.waitNav("the first answer to the second question", oldAnswer, "1/2")
	b.click(branchSel + " li.msg .version-prev")
	b.waitBranch("the first question", "What is two plus two?", "The first answer.")
	b.click(branchSel + " li.msg .version-next")
	b.click(branchSel + " li.msg .version-next")
	b.waitGone("back to the history", branchSel)
	b.waitText("the question in the history", userMsg+" .msg-text", `t === "What is four plus four?"`)
}

// branchSel is the earlier version shown in place of the history.
const branchSel = `#messages li.msg-branch`

// waitNav waits until the message sel shows the version navigation
// reading want ("2/3").
func (b *browser) waitNav(what, sel, want string) {
	b.t.Helper()
	b.waitText(what, sel+" .versions-nav .version-count", fmt.Sprintf(`t === %s`, jsString(want)))
}

// waitBranch waits until the earlier version shown reads want: the texts
// of its messages, in order.
func (b *browser) waitBranch(what string, want ...string) {
	b.t.Helper()
	const texts = `[...document.querySelectorAll("#messages li.msg-branch li.msg:not([hidden]) .msg-text")].map((e) => e.textContent.trim())`
	j, err := json.Marshal(want)
	if err != nil {
		b.t.Fatal(err)
	}
	b.waitJS(what, fmt.Sprintf(`JSON.stringify(%s) === %s`, texts, jsString(string(j))), texts)
}

// pageBack pages message sel back one version, and checks that the
// earlier version shows in its place, read-only, reading at (its
// navigation, "1/2") and the texts want (it and what followed it), the
// history from sel on hidden; then pages forward to the history again.
func (b *browser) pageBack(what, sel, at string, want ...string) {
	b.t.Helper()
	b.click(sel + " .version-prev")
	b.waitNav(what+": the earlier version's place", branchSel+" li.msg", at)
	b.waitBranch(what, want...)
	if n := b.visibleCount(sel); n != 0 {
		b.t.Errorf("%s: the message paged back is still shown", what)
	}
	if !eval[bool](b, `Boolean(document.activeElement && document.activeElement.closest("#messages li.msg-branch .versions-nav"))`) {
		b.t.Errorf("%s: the focus did not move to the earlier version's navigation", what)
	}
	if n := b.count(branchSel + " button.msg-edit, " + branchSel + " button.msg-regenerate, " + branchSel + " button.msg-fork"); n != 0 {
		b.t.Errorf("%s: the earlier version offers %d actions, want none (read-only)", what, n)
	}
	b.screenshot(strings.ReplaceAll(what, " ", "-"))
	b.click(branchSel + " li.msg .version-next")
	b.waitGone(what+": back to the history", branchSel)
	b.visible(sel)
	if !eval[bool](b, fmt.Sprintf(`Boolean(document.activeElement && document.activeElement.closest(%s))`, jsString(sel+" .versions-nav"))) {
		b.t.Errorf("%s: the focus did not move back to the message's navigation", what)
	}
}

// TestBrowserCompaction: the header's context meter shows the chat's
// context against the model's window and follows the chat; Compact is
// offered only when there is more than the last turn to summarise; each
// compaction's divider stands right after the last message it summarises
// (not where the compaction message was written, after the turns kept
// verbatim), says how many messages it stands for, and unfolds the summary.
func TestBrowserCompaction(t *testing.T) {
	t.Parallel()
	u := startUI(t, "    context_window: 100000\n")
	b := newBrowser(t, desktop)
	u.fake.Push(llmtest.Turn{Text: "The first answer."})
	id := u.createChat(t, `{"title": "compaction", "message": "First question?"}`)
	b.openChat(u, id)
	b.waitJS("the first answer shows", answerShown("The first answer."), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")
	b.visible("#chat-context")
	b.waitText("the meter shows the window", "#context-text", `t.includes("/ 100,000 tokens (")`)
	before, _ := strconv.Atoi(eval[string](b, `document.querySelector("#chat-context").dataset.tokens`))

	// One turn: nothing to compact, and Compact says so rather than ask.
	b.waitJS("Compact is not offered on one turn", `document.querySelector("#compact").disabled`, `document.querySelector("#compact").outerHTML`)
	if title := eval[string](b, `document.querySelector("#compact").title`); !strings.Contains(title, "Nothing to compact") {
		t.Errorf("the disabled Compact says %q", title)
	}

	// A second turn: the meter is read again and grows.
	u.fake.Push(llmtest.Turn{Text: "The second answer, " + strings.Repeat("which is rather long; ", 40)})
	b.typeInto("#composer-input", "Second question?\r")
	b.waitJS("the second answer shows", answerShown("The second answer"), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")
	b.waitJS("the meter follows the chat", fmt.Sprintf(`Number(document.querySelector("#chat-context").dataset.tokens) > %d`, before),
		`document.querySelector("#chat-context").dataset.tokens`)
	ids := eval[[]string](b, `[...document.querySelectorAll("#messages li.msg[data-message-id]")].map((e) => e.dataset.messageId)`)
	if len(ids) != 4 {
		t.Fatalf("messages shown: %v, want 4", ids)
	}

	// The first compaction summarises the first turn (the second fits the
	// quarter of the window kept verbatim): its divider goes between the
	// turns, after the first answer.
	const summary = "Summary: the user asked a first question."
	u.fake.Push(llmtest.Turn{Text: summary})
	b.click("#compact")
	b.waitCount("a compaction divider shows", "#messages li.msg.compaction", 1)
	b.waitStatus("waiting")
	divider := `#messages li.msg.compaction`
	if prev := eval[string](b, `document.querySelector("#messages li.msg.compaction").previousElementSibling?.dataset.messageId ?? ""`); prev != ids[1] {
		t.Errorf("the divider follows message %q, want %s (the last one summarised); the order is %v", prev, ids[1],
			eval[[]string](b, `[...document.querySelectorAll("#messages li.msg")].map((e) => e.dataset.role + " " + e.dataset.messageId)`))
	}
	b.waitText("the divider says what it stands for", divider+" summary", `t.includes("2 messages above summarised") && t.includes("on request")`)
	if b.text("#composer-error") != "" {
		t.Errorf("the composer still shows %q after a compaction", b.text("#composer-error"))
	}
	if n := b.count(assistantMsg); n != 2 {
		t.Errorf("%d answers shown, want the 2 (the compaction is no answer)", n)
	}
	if n := b.visibleCount(divider + " .compaction-text"); n != 0 {
		t.Errorf("the summary is shown before it is unfolded")
	}
	b.click(divider + " summary")
	b.waitJS("the summary unfolds", `document.querySelector("#messages li.msg.compaction details").open && document.querySelector("#messages li.msg.compaction .compaction-text").checkVisibility()`, "")
	if got := b.text(divider + " .compaction-text"); !strings.Contains(got, summary) {
		t.Errorf("the unfolded summary says %q, want %q", got, summary)
	}
	b.screenshot("compaction-divider")
	reqs := modelRequests(t, u.fake)
	if len(reqs) != 3 || !sentContains(reqs[2], "First question?") || sentContains(reqs[2], "Second question?") {
		t.Errorf("the third model request is not the summary of the first turn: %+v", reqs)
	}
	// What is left since the cut is one turn: nothing more to compact.
	b.waitJS("Compact is not offered again on the turn left", `document.querySelector("#compact").disabled`, `document.querySelector("#compact").outerHTML`)

	// A third turn, compacted: a second divider, after the second answer,
	// saying it includes the previous summary; no copy of the first.
	u.fake.Push(llmtest.Turn{Text: "The third answer."})
	b.typeInto("#composer-input", "Third question?\r")
	b.waitJS("the third answer shows", answerShown("The third answer."), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")
	b.waitJS("Compact is offered", `!document.querySelector("#compact").disabled`, `document.querySelector("#compact").outerHTML`)

	// The composer's commands: an unknown one is refused, /edit opens the
	// editor on the last question, /compact compacts; none reaches the model.
	b.typeInto("#composer-input", "/nonsense\r")
	b.waitText("an unknown command is refused", "#composer-error", `t.includes("Unknown command /nonsense")`)
	b.replaceValue("#composer-input", "/edit Third question, edited?")
	b.typeInto("#composer-input", "\r")
	b.waitJS("/edit opens the editor on the last question", fmt.Sprintf(`[...document.querySelectorAll(%s)].pop()?.querySelector("textarea.msg-edit-input")?.value.trim() === "Third question, edited?"`, jsString(userMsg)),
		`document.querySelector("#messages").innerHTML.slice(-400)`)
	b.do("cancel the edit", chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#messages button.msg-edit-cancel")].pop().click()`))
	if v := eval[string](b, `document.querySelector("#composer-input").value`); v != "" {
		t.Errorf("the composer still holds %q after /edit", v)
	}
	u.fake.Push(llmtest.Turn{Text: "Summary: three questions."})
	b.typeInto("#composer-input", "/compact\r")
	b.waitCount("a second divider shows", divider, 2)
	b.waitStatus("waiting")
	order := eval[[]string](b, `[...document.querySelectorAll("#messages li.msg")].map((e) => e.dataset.role)`)
	want := []string{"user", "assistant", "compaction", "user", "assistant", "compaction", "user", "assistant"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("the conversation reads %v, want %v", order, want)
	}
	texts := eval[[]string](b, `[...document.querySelectorAll("#messages li.msg.compaction summary")].map((e) => e.textContent)`)
	if len(texts) != 2 || texts[0] == texts[1] || !strings.Contains(texts[1], "with the previous summary") {
		t.Errorf("the dividers say %q: each must say what it stands for", texts)
	}
	reqs = modelRequests(t, u.fake)
	if len(reqs) != 5 {
		t.Errorf("the model got %d requests, want 5 (three answers, two summaries)", len(reqs))
	}
	for i, r := range reqs {
		if sentContains(r, "/nonsense") || sentContains(r, "/compact") || sentContains(r, "/edit") {
			t.Errorf("model request %d carries a composer command: %+v", i+1, r)
		}
	}
}
