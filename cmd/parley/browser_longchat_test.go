package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

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
// the copied messages. Edit and Regenerate are offered only while the chat
// is idle.
func TestBrowserEditRegenerateFork(t *testing.T) {
	t.Parallel()
	u := startUI(t)
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
	reqs = modelRequests(t, u.fake)
	if len(reqs) != 3 || !sentContains(reqs[2], "three plus three") || sentContains(reqs[2], "The second answer.") {
		t.Fatalf("the regeneration did not ask the question alone again: %+v", reqs)
	}

	// Another client edits the question: the stream's history event
	// removes the answer and shows the new text.
	gate, started = make(chan struct{}), make(chan struct{})
	u.fake.Push(llmtest.Turn{Text: "The fourth answer.", Gate: gate, Started: started})
	question := eval[string](b, fmt.Sprintf(`document.querySelector(%s).dataset.messageId`, jsString(userMsg)))
	if code, body := do(t, "PATCH", u.url+"/api/v1/chats/"+id+"/messages/"+question, u.token, `{"content": "What is four plus four?"}`); code != 200 {
		t.Fatalf("PATCH the question from another client: %d %s", code, body)
	}
	b.waitClosed("the model is asked the other client's question", started)
	b.waitGone("the answer to the old question is gone", assistantMsg+"[data-message-id]")
	b.waitText("the question is the other client's", userMsg+" .msg-text", `t === "What is four plus four?"`)
	close(gate)
	b.waitJS("the answer to it arrives", answerShown("The fourth answer."), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")

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
}

// TestBrowserCompaction: the header's context meter shows the chat's
// context against the model's window and follows the chat; Compact on a
// chat of one turn shows the server's refusal, and on two turns puts a
// divider with the summary, folded, in the conversation.
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

	// One turn: nothing to compact, and the UI says the server's reason.
	b.allow(`^browser log \(network, error\): Failed to load resource: the server responded with a status of 409 .*/compact$`)
	b.click("#compact")
	b.waitText("the refusal is shown", "#composer-error", `t.includes("nothing to compact")`)
	b.visible("#composer-error")

	// A second turn: the meter is read again and grows.
	u.fake.Push(llmtest.Turn{Text: "The second answer, " + strings.Repeat("which is rather long; ", 40)})
	b.typeInto("#composer-input", "Second question?\r")
	b.waitJS("the second answer shows", answerShown("The second answer"), `document.querySelector("#messages").textContent`)
	b.waitStatus("waiting")
	b.waitJS("the meter follows the chat", fmt.Sprintf(`Number(document.querySelector("#chat-context").dataset.tokens) > %d`, before),
		`document.querySelector("#chat-context").dataset.tokens`)

	const summary = "Summary: the user asked two questions."
	u.fake.Push(llmtest.Turn{Text: summary})
	b.click("#compact")
	b.waitCount("a compaction divider shows", "#messages li.msg.compaction", 1)
	b.waitStatus("waiting")
	b.waitText("the divider says what it is", "#messages li.msg.compaction summary", `t.includes("Earlier messages summarised")`)
	if b.text("#composer-error") != "" {
		t.Errorf("the composer still shows %q after a compaction", b.text("#composer-error"))
	}
	if n := b.count(assistantMsg); n != 2 {
		t.Errorf("%d answers shown, want the 2 (the compaction is no answer)", n)
	}
	if n := b.visibleCount("#messages li.msg.compaction .compaction-text"); n != 0 {
		t.Errorf("the summary is shown before it is unfolded")
	}
	b.click("#messages li.msg.compaction summary")
	b.waitJS("the summary unfolds", `document.querySelector("#messages li.msg.compaction details").open && document.querySelector("#messages li.msg.compaction .compaction-text").checkVisibility()`, "")
	if got := b.text("#messages li.msg.compaction .compaction-text"); !strings.Contains(got, summary) {
		t.Errorf("the unfolded summary says %q, want %q", got, summary)
	}
	b.screenshot("compaction-divider")
	reqs := modelRequests(t, u.fake)
	if len(reqs) != 3 || !sentContains(reqs[2], "First question?") {
		t.Errorf("the third model request is not the summary of the first turn: %+v", reqs)
	}
}
