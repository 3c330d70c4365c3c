package browsertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// listedIDs is a JavaScript expression: the ids of the chats the list
// shows, sorted, joined with commas.
const listedIDs = `[...document.querySelectorAll("#chat-list li.chat-item")].map((li) => li.dataset.chatId).sort().join(",")`

// waitListed waits until the chat list shows exactly the chats ids.
func (b *browser) waitListed(what string, ids ...string) {
	b.t.Helper()
	want := slices.Clone(ids)
	slices.Sort(want)
	b.waitJS(what, fmt.Sprintf(`%s === %s`, listedIDs, jsString(strings.Join(want, ","))), listedIDs)
}

// waitListStatus waits until the list shows chat id with status.
func (b *browser) waitListStatus(id, status string) {
	b.t.Helper()
	b.waitJS("the list shows chat "+id+" as "+status,
		fmt.Sprintf(`document.querySelector(%s)?.dataset.status === %s`, jsString(chatItem(id)), jsString(status)),
		fmt.Sprintf(`document.querySelector(%s)?.outerHTML ?? "(not listed)"`, jsString(chatItem(id))))
}

// getChat reads a chat through the API, as another client would.
func (u *uiServer) getChat(t *testing.T, id string) chat.Chat {
	t.Helper()
	code, body := get(t, u.URL+"/api/v1/chats/"+id, u.Token)
	var c chat.Chat
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil {
		t.Fatalf("GET chat %s: %d %s", id, code, body)
	}
	return c
}

// getMessages reads a chat's whole history through the API.
func (u *uiServer) getMessages(t *testing.T, id string) []chat.Message {
	t.Helper()
	code, body := get(t, u.URL+"/api/v1/chats/"+id+"/messages?limit=500", u.Token)
	var page struct {
		Messages []chat.Message `json:"messages"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("GET messages of %s: %d %s", id, code, body)
	}
	return page.Messages
}

// TestBrowserManageChats: the list's filters (status and label on the
// server, title search in the page), then renaming, archiving and
// deleting a chat from its header, and a chat made in the New chat dialog
// with a system prompt, its tools and an approval glob, which the chat
// keeps and the model's call then honours.
func TestBrowserManageChats(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	u.fake.Push(llmtest.Turn{Status: 400, ErrorMessage: "the fake refuses this one"})
	broken := u.createChat(t, `{"title": "beta report", "labels": {"team": "b"}, "message": "fail, please"}`)
	alpha := u.createChat(t, `{"title": "alpha report", "labels": {"team": "a"}}`)
	gamma := u.createChat(t, `{"title": "gamma notes", "labels": {"team": "a"}}`)
	plan := u.createChat(t, `{"title": "quarterly plan"}`)
	b.signIn(u)
	b.waitListed("the list shows every chat", broken, alpha, gamma, plan)
	b.waitListStatus(broken, "error")

	// Filters.
	b.replaceValue("#filter-status", "error")
	b.waitListed("the status filter shows the failed chat only", broken)
	b.replaceValue("#filter-status", "")
	b.waitListed("without the status filter every chat is back", broken, alpha, gamma, plan)

	b.typeInto("#filter-label", "team:a\r")
	b.waitListed("the label filter shows the chats labelled team:a", alpha, gamma)
	b.screenshot("label-filter")
	b.replaceValue("#filter-label", "")
	b.waitListed("without the label filter every chat is back", broken, alpha, gamma, plan)

	b.typeInto("#filter-search", "report")
	b.waitListed("the title search shows the reports", broken, alpha)
	b.replaceValue("#filter-search", "")
	b.waitListed("without a search every chat is back", broken, alpha, gamma, plan)
	if msg := b.text("#filter-error"); strings.TrimSpace(msg) != "" {
		t.Errorf("the filters show the error %q", msg)
	}

	// Rename.
	b.click(chatItem(plan) + " a")
	b.visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, plan))
	b.waitText("the chat's title shows", "#chat-title", `t.trim() === "quarterly plan"`)
	b.click("#rename")
	b.visible("dialog#rename-dialog")
	if v := eval[string](b, `document.querySelector("#rename-input").value`); v != "quarterly plan" {
		t.Errorf("the rename field starts with %q, want the title", v)
	}
	b.replaceValue("#rename-input", "yearly plan")
	b.click("#rename-save")
	b.do("wait for the rename dialog to close", chromedp.WaitNotVisible(chromedp.CSS("dialog#rename-dialog")))
	b.waitText("the header shows the new title", "#chat-title", `t.trim() === "yearly plan"`)
	b.waitText("the list shows the new title", chatItem(plan)+" .chat-title", `t.trim() === "yearly plan"`)
	if c := u.getChat(t, plan); c.Title != "yearly plan" {
		t.Errorf("through the API the renamed chat's title is %q", c.Title)
	}

	// Archive.
	b.click("#archive")
	b.waitListed("the archived chat leaves the list", broken, alpha, gamma)
	b.waitText("the button now unarchives", "#archive", `t.trim() === "Unarchive"`)
	if c := u.getChat(t, plan); !c.Archived {
		t.Error("through the API the chat is not archived")
	}
	b.click("#filter-archived")
	b.waitListed("the archived filter shows the archived chat only", plan)
	b.screenshot("archived")

	// Delete.
	b.click("#delete")
	b.visible("dialog#confirm-dialog")
	b.waitText("the confirmation names the chat", "#confirm-text", `t.includes("yearly plan")`)
	b.click("#confirm-yes")
	b.waitJS("the view returns to the list", `location.hash === "#/" && !document.querySelector("main#chat").checkVisibility()`,
		`location.hash + " " + document.querySelector("main#chat").outerHTML.slice(0, 200)`)
	b.waitListed("the deleted chat is gone from the list")
	if code, body := get(t, u.URL+"/api/v1/chats/"+plan, u.Token); code != http.StatusNotFound {
		t.Errorf("GET of the deleted chat: %d %s, want 404", code, body)
	}
	b.click("#filter-archived")
	b.waitListed("the other chats are listed", broken, alpha, gamma)

	// New chat dialog: system prompt, tools, approval.
	b.click("#new-chat")
	b.visible("dialog#new-chat-dialog")
	b.typeInto("#new-title", "clock with care")
	b.typeInto("#new-system", "Answer in one sentence.")
	b.click("#new-chat-form details > summary")
	b.typeInto("#new-tools", "current_time")
	b.typeInto("#new-approve", "current_time")
	b.screenshot("new-chat-dialog")
	b.click("#new-create")
	b.do("wait for the dialog to close", chromedp.WaitNotVisible(chromedp.CSS("dialog#new-chat-dialog")))
	b.visible("main#chat")
	id := eval[string](b, `document.querySelector("main#chat").dataset.chatId ?? ""`)
	if id == "" || slices.Contains([]string{broken, alpha, gamma, plan}, id) {
		t.Fatalf("after Create the chat open is %q", id)
	}
	b.visible(chatItem(id))
	c := u.getChat(t, id)
	if c.Title != "clock with care" || c.SystemPrompt != "Answer in one sentence." {
		t.Errorf("the new chat has the title %q and the system prompt %q", c.Title, c.SystemPrompt)
	}
	if !slices.Equal(c.Tools, chat.ToolGlobs{"current_time"}) || !slices.Equal(c.Approve, chat.ToolGlobs{"current_time"}) {
		t.Errorf("the new chat has the tools %q and approves %q, want current_time for both", c.Tools, c.Approve)
	}

	// The approval glob holds the model's call for a person.
	u.fake.Push(
		llmtest.Turn{Text: "Let me look at the clock.", ToolCalls: []llmtest.ToolCall{{ID: "call_c1", Name: "current_time", Args: `{"timezone":"Europe/Paris"}`}},
			Usage: llmtest.Usage{InputTokens: 212, OutputTokens: 31}},
		llmtest.Turn{Text: "It is morning in Paris.", Usage: llmtest.Usage{InputTokens: 268, OutputTokens: 9}},
	)
	b.typeInto("#composer-input", "What time is it in Paris?\r")
	approval := callForm("approval", "call_c1")
	b.visible(approval + " button.approve")
	b.waitStatus("requires_action")
	b.waitText("the call's card waits", toolCard("call_c1")+" .tool-name", `t.trim() === "current_time"`)
	b.docScreenshot("web-ui-approval.png")
	b.click(approval + " button.approve")
	b.waitAnyText("the answer shows", answerText, "It is morning in Paris.")
	b.waitStatus("waiting")
	b.waitText("the approved call ran", toolCard("call_c1")+" .tool-output", `t.includes("Europe/Paris")`)

	reqs := modelRequests(t, u.fake)
	if len(reqs) != 3 {
		t.Fatalf("the model got %d requests, want 3 (the failed chat's, then two of the new one)", len(reqs))
	}
	if m := reqs[1].Messages; len(m) == 0 || m[0].Role != "system" || !strings.Contains(string(m[0].Content), "Answer in one sentence.") {
		t.Errorf("the model was not given the system prompt: %+v", m)
	}
}
