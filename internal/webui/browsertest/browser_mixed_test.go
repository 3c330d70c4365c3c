package browsertest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestBrowserMixedStep: one step calls a dynamic tool and a tool that
// needs approval. Approving the one leaves the other's form as it was,
// with what was typed into it; then the result is sent, the approved call
// runs, and the model sees both results.
func TestBrowserMixedStep(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)

	u.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{
			{ID: "call_d", Name: "get_weather", Args: `{"city": "Oslo"}`},
			{ID: "call_a", Name: "current_time", Args: `{"timezone": "UTC"}`},
		}},
		llmtest.Turn{Text: "Cold in Oslo, and I know the time."},
	)
	id := u.createChat(t, `{"title": "mixed", "message": "Weather and time?", "approve": ["current_time"],
		"dynamic_tools": [{"name": "get_weather", "description": "The weather of a city",
			"input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
			"output_schema": {"type": "object", "properties": {"temp_c": {"type": "number"}}, "required": ["temp_c"]}}]}`)
	b.openChat(u, id)

	client, approval := callForm("client", "call_d"), callForm("approval", "call_a")
	b.visible(approval + " button.approve")
	b.typeInto(client+` [name="temp_c"]`, "-3")
	// Marks the input, to tell it from one made again.
	eval[bool](b, fmt.Sprintf(`(document.querySelector(%s).__kept = true)`, jsString(client+` [name="temp_c"]`)))
	b.click(approval + " button.approve")
	b.waitGone("the approval is answered", approval)
	b.waitStatus("requires_action")
	if kept := eval[bool](b, fmt.Sprintf(`document.querySelector(%s)?.__kept === true && document.querySelector(%s).value === "-3"`,
		jsString(client+` [name="temp_c"]`), jsString(client+` [name="temp_c"]`))); !kept {
		t.Errorf("the result form was made again (or lost what was typed) when the approval was sent")
	}
	b.waitText("the approved call's card shows the approval", toolCard("call_a")+" .tool-decision", `/approved/i.test(t)`)
	b.screenshot("approved-result-pending")

	b.click("#submit-results")
	b.waitAnyText("the answer shows", answerText, "Cold in Oslo")
	b.waitStatus("waiting")
	b.waitText("the approved call ran", toolCard("call_a")+" .tool-output", `t.includes("UTC")`)
	reqs := modelRequests(t, u.fake)
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	if res, _ := toolResult(reqs[1], "call_d"); !strings.Contains(res, `"temp_c":-3`) {
		t.Errorf("the model got %q for the dynamic call, want the typed temperature", res)
	}
	if res, _ := toolResult(reqs[1], "call_a"); !strings.Contains(res, "UTC") {
		t.Errorf("the model got %q for the approved call, want its time", res)
	}
}

// TestBrowserTokenLinkInPage: a #token= link followed inside the page
// (one a model wrote, say) does not replace the token in use; only a page
// load reads the address's token.
func TestBrowserTokenLinkInPage(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)
	b.signIn(u)
	eval[bool](b, `(location.hash = "#token=prl_someone_else", true)`)
	b.waitJS("the route follows the address", `location.hash === "#token=prl_someone_else"`, `location.hash`)
	if got := eval[string](b, `localStorage.getItem("parley.token") ?? ""`); got != u.Token {
		t.Errorf("the stored token became %q after a link inside the page", got)
	}
	if in := eval[string](b, `document.body.dataset.signedIn`); in != "true" {
		t.Errorf("signed in: %q after a link inside the page", in)
	}
}

// TestBrowserCreateWarnings: what the server notes about a new chat (a
// tool glob that matches no tool) is shown in the chat the dialog opens.
func TestBrowserCreateWarnings(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	b := newBrowser(t, desktop)
	b.signIn(u)
	b.click("#new-chat")
	b.typeInto("#new-title", "warned")
	b.click("#new-chat-form details > summary")
	b.typeInto("#new-tools", "current_time, nomatch_*")
	b.click("#new-create")
	b.visible("main#chat")
	b.waitText("the warning shows", "#action-notice", `t.includes("nomatch_*") && t.includes("matches no server-side tool")`)
}
