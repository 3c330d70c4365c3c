package browsertest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// agentItem is the Agents list's entry of an agent.
func agentItem(name string) string {
	return fmt.Sprintf(`#agents-list li.agent-item[data-agent="%s"]`, name)
}

// agentFieldErrors is a JavaScript expression: the texts of the errors shown
// under the agent form's field id.
func agentFieldErrors(id string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("#%s-error li")].map((e) => e.textContent).join(" | ")`, id)
}

// TestBrowserAgents: the Agents page lists the configured agent marked
// read-only; a new agent whose output schema is wrong says so as it is
// typed (and a malformed tool glob too) and is not saved; a timeout the
// server refuses is shown on its field; once right it is saved (version
// 1), listed, edited with the keyboard (version 2), and its history shows
// the two versions and the line added. "New chat with this agent" opens
// the New chat form with it chosen; the chat's header names the agent and
// its version with a link to it; parley's request to repair a prose
// answer is shown as parley's (and /edit passes it by), and the JSON
// answer as highlighted JSON, once. At a phone's width the agent's page
// and form fit the screen. Deleting it asks first.
func TestBrowserAgents(t *testing.T) {
	t.Parallel()
	u := startUI(t, `agents:
  - name: helper
    description: Configured for everyone
`)
	b := newBrowser(t, desktop)
	// The server's refusal of the timeout, which the test provokes.
	b.allow(`status of 400 \(Bad Request\) http://[^ ]+/api/v1/agents$`)
	b.signIn(u)
	b.click("#nav-agents")
	b.visible(agentItem("helper") + `[data-source="config"] .agent-readonly`)
	b.waitGone("no agent of the owner's listed yet", agentItem("researcher"))

	b.click("#agent-new")
	b.visible("#agent-form")
	b.typeInto("#agent-name", "researcher")
	b.typeInto("#agent-description", "Finds sources")
	b.typeInto("#agent-tools", "current_[time")
	b.waitJS("the malformed glob is said as it is typed", agentFieldErrors("agent-tools")+`.includes("not closed")`, agentFieldErrors("agent-tools"))
	b.replaceValue("#agent-tools", "current_*")
	b.waitJS("the glob, corrected, is no longer at fault", agentFieldErrors("agent-tools")+` === ""`, agentFieldErrors("agent-tools"))
	b.typeInto("#agent-output-schema", `{"type": "object", "properties": {"summary": {"type": "strin"}}}`)
	b.waitJS("the schema's error shows as it is typed",
		agentFieldErrors("agent-output-schema")+`.includes("properties.summary.type must be one of")`, agentFieldErrors("agent-output-schema"))
	b.screenshot("agent-form-error")
	if got := eval[string](b, `document.querySelector("#agent-output-schema").getAttribute("aria-invalid")`); got != "true" {
		t.Errorf("the schema field at fault has aria-invalid=%q", got)
	}
	b.click("#agent-save")
	b.waitText("the save is refused", "#agent-form-error", `t.startsWith("Not saved")`)
	if got := eval[string](b, `document.activeElement.id`); got != "agent-output-schema" {
		t.Errorf("after the refused save the focus is on %q, want the schema", got)
	}
	if code, body := get(t, u.URL+"/api/v1/agents/researcher", u.Token); code != http.StatusNotFound {
		t.Fatalf("an agent with a wrong schema was saved: %d %s", code, body)
	}

	// What only the server knows: a timeout above its limit.
	b.replaceValue("#agent-output-schema", `{"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}`)
	b.waitJS("the schema, corrected, is no longer at fault", agentFieldErrors("agent-output-schema")+` === ""`, agentFieldErrors("agent-output-schema"))
	b.typeInto("#agent-limits-timeout", "25h")
	b.click("#agent-save")
	b.waitJS("the server's refusal is shown on the timeout", agentFieldErrors("agent-limits-timeout")+`.includes("25h")`, agentFieldErrors("agent-limits-timeout"))
	if code, _ := get(t, u.URL+"/api/v1/agents/researcher", u.Token); code != http.StatusNotFound {
		t.Fatalf("an agent the server refused exists: %d", code)
	}
	b.replaceValue("#agent-limits-timeout", "10m")
	b.click("#agent-save")
	b.waitJS("the saved agent is shown", `location.hash === "#/agents/researcher"`, `location.hash`)
	b.waitText("the agent is at version 1", "#agent-detail-version", `t === "version 1"`)
	b.screenshot("agent")

	b.click(`#agent-detail a[href="#/agents"]`)
	b.waitAnyText("the agent is listed", agentItem("researcher")+`[data-source="api"]`, "version 1")
	if n := b.count(agentItem("researcher") + " .agent-readonly"); n != 0 {
		t.Error("the owner's agent is marked read-only")
	}
	if bad := eval[[]string](b, unnamedControls); len(bad) != 0 {
		t.Errorf("controls without an accessible name on the Agents page: %q", bad)
	}

	// Edit with the keyboard: the form submits with Enter in a field.
	b.click(agentItem("researcher") + " a.agent-link")
	b.click("#agent-edit")
	b.waitJS("the form holds the agent", `document.querySelector("#agent-limits-timeout").value === "10m"`,
		`document.querySelector("#agent-limits-timeout").value`)
	if bad := eval[[]string](b, unnamedControls); len(bad) != 0 {
		t.Errorf("controls without an accessible name in the agent form: %q", bad)
	}
	b.replaceValue("#agent-system-prompt", "Answer with a summary.")
	b.typeInto("#agent-limits-timeout", "\r")
	b.waitText("the edit made version 2", "#agent-detail-version", `t === "version 2"`)
	b.waitCount("both versions are listed", "#agent-history-body .agent-versions li", 2)
	b.waitAnyText("the diff shows the prompt added", "#agent-diff .diff-add", `"system_prompt": "Answer with a summary."`)
	b.waitAnyText("the diff shows the prompt removed", "#agent-diff .diff-del", `"system_prompt": ""`)
	if got := b.text("#agent-diff-summary"); !strings.Contains(got, "From version 1 to version 2") {
		t.Errorf("the diff's summary says %q", got)
	}
	b.docScreenshot("web-ui-agent-versions.png")

	// A new chat with the agent, from its page.
	// The first answer is prose: parley asks the model to repair it.
	u.fake.Push(llmtest.Turn{Text: "Many things changed."}, llmtest.Turn{Text: `{"summary": "Go 1.26 changed <b>things</b>"}`})
	b.click("#agent-chat")
	b.visible("#new-chat-dialog[open]")
	b.waitJS("the New chat form has the agent chosen", `document.querySelector("#new-agent").value === "researcher"`,
		`document.querySelector("#new-agent").value`)
	if got := b.text("#new-agent-note"); !strings.Contains(got, "version 2") {
		t.Errorf("the New chat form says %q of the agent", got)
	}
	b.typeInto("#new-title", "from an agent")
	b.typeInto("#new-message", "What changed?")
	b.click("#new-create")
	b.waitJS("the new chat is open", `location.hash.startsWith("#/chats/")`, `location.hash`)
	b.waitText("the header names the agent and its version", "#chat-agent-link", `t === "researcher, version 2"`)
	if href := eval[string](b, `document.querySelector("#chat-agent-link").getAttribute("href")`); href != "#/agents/researcher" {
		t.Errorf("the header's agent links to %q", href)
	}
	b.waitStatus("waiting")
	reqs := modelRequests(t, u.fake)
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Messages[0].Content), "Answer with a summary.") {
		t.Errorf("the model was not asked with the agent's version 2 prompt, then to repair: %+v", reqs)
	}
	b.waitAnyText("parley's repair request is shown as parley's", `#messages li.msg[data-role=user][data-repair="true"] .msg-role`, "parley")
	if got := b.text(`#messages li.msg[data-repair="true"] .msg-repair-text`); !strings.Contains(got, "does not match") {
		t.Errorf("the repair request reads %q", got)
	}
	if n := b.count(`#messages li.msg[data-repair="true"] .msg-edit`); n != 0 {
		t.Error("parley's repair request offers Edit")
	}
	if n := b.count(`#messages li.msg[data-role=user]:not([data-repair]) .msg-role`); n != 1 || b.text(`#messages li.msg[data-role=user]:not([data-repair]) .msg-role`) != "You" {
		t.Errorf("the person's message is not shown as theirs (%d)", n)
	}
	b.waitAnyText("the output is shown as JSON", assistantMsg+" .msg-output code.hljs.language-json", `"summary": "Go 1.26 changed <b>things</b>"`)
	if n := b.count(assistantMsg + " .msg-output .hljs-attr"); n == 0 {
		t.Error("the output's JSON is not highlighted")
	}
	if n := b.count(assistantMsg + " .msg-output b"); n != 0 {
		t.Error("the output's text was read as HTML")
	}
	// Each answer's text, "" for one that shows none.
	texts := eval[[]string](b, `[...document.querySelectorAll("#messages li.msg[data-role=assistant][data-message-id]")]
		.map((li) => [...li.querySelectorAll(".msg-text")].map((e) => e.textContent).join(""))`)
	if len(texts) != 2 || !strings.Contains(texts[0], "Many things changed.") || texts[1] != "" {
		t.Errorf("the answers read %q; want the prose parley asked to repair, then none besides the output", texts)
	}
	b.screenshot("agent-chat")
	// "/edit" edits the person's last message, not parley's request.
	b.typeInto("#composer-input", "/edit\r")
	b.visible(`#messages li.msg[data-role=user]:not([data-repair]) form.msg-editor`)
	if n := b.count(`#messages li.msg[data-repair="true"] form.msg-editor`); n != 0 {
		t.Error("/edit opened the editor on parley's repair request")
	}

	// At a phone's width, the agent's page fits the screen.
	p := newBrowser(t, phone)
	p.signIn(u)
	p.navigate(u.URL + "/#/agents/researcher")
	p.waitText("the phone shows the agent", "#agent-detail-version", `t === "version 2"`)
	p.waitCount("the phone shows the history", "#agent-history-body .agent-versions li", 2)
	if w := eval[int](p, `document.documentElement.scrollWidth`); w > phone.width {
		t.Errorf("at a phone's width the agent's page is %d px wide", w)
	}
	p.screenshot("agent-phone")
	p.click("#agent-edit")
	p.waitJS("the phone shows the form", `document.querySelector("#agent-limits-timeout")?.value === "10m"`,
		`document.querySelector("#agent-limits-timeout")?.value ?? "(no form)"`)
	if w := eval[int](p, `document.documentElement.scrollWidth`); w > phone.width {
		t.Errorf("at a phone's width the agent form is %d px wide", w)
	}

	b.click("#chat-agent-link")
	b.click("#agent-delete")
	b.visible("#agent-confirm-dialog[open]")
	if got := b.text("#agent-confirm-text"); !strings.Contains(got, "researcher") {
		t.Errorf("the confirmation says %q", got)
	}
	b.click("#agent-confirm-yes")
	b.waitJS("the list is shown again", `location.hash === "#/agents"`, `location.hash`)
	b.visible(agentItem("helper"))
	b.waitGone("the deleted agent is not listed", agentItem("researcher"))
	if code, _ := get(t, u.URL+"/api/v1/agents/researcher", u.Token); code != http.StatusNotFound {
		t.Errorf("the deleted agent reads %d", code)
	}
}
