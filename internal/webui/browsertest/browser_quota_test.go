package browsertest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestBrowserBudget: an owner whose daily token budget is used up sees,
// in words, that a message was refused and when the budget resets, and a
// chat that the budget stopped between two steps shows "Budget reached"
// with a way on (Retry). The Usage view shows the tokens used against the
// limit, the top bar warns from 80% of it on, and the admin sets their own
// and another owner's limits in the view's form.
func TestBrowserBudget(t *testing.T) {
	t.Parallel()
	u := startUI(t, "quotas:\n  defaults:\n    tokens_per_day: 100\n")
	b := newBrowser(t, desktop)

	// The first step asks the client for a tool and uses the whole budget;
	// the step after the client's result is refused before its model call.
	u.fake.Push(llmtest.Turn{
		ToolCalls: []llmtest.ToolCall{{ID: "call_b1", Name: "lookup", Args: `{"q":"x"}`}},
		Usage:     llmtest.Usage{InputTokens: 90, OutputTokens: 30},
	})
	id := u.createChat(t, `{"title": "budget", "message": "Look it up.",
		"dynamic_tools": [{"name": "lookup", "description": "Look something up",
			"input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]}`)
	b.openChat(u, id)
	b.waitStatus("requires_action")
	code, body := do(t, http.MethodPost, u.URL+"/api/v1/chats/"+id+"/tool-results", u.Token,
		`{"results": [{"tool_call_id": "call_b1", "output": "found"}]}`)
	if code != http.StatusOK {
		t.Fatalf("post the tool result: %d %s", code, body)
	}
	b.waitStatus("error")
	b.waitText("the stop is named plainly", "#chat-error .error-kind", `t.trim() === "Budget reached"`)
	b.waitText("the stop says when the budget resets", "#chat-error .error-message", `t.includes("resets")`)
	b.visible("#retry")
	code, body = get(t, u.URL+"/api/v1/chats/"+id, u.Token)
	var c chat.Chat
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil || c.LastError == nil || c.LastError.Kind != "spend_limit" {
		t.Fatalf("the chat through the API: %d %s", code, body)
	}
	if n := len(u.fake.Requests()); n != 1 {
		t.Errorf("the model got %d requests, want 1: the step after the budget was used up must not call it", n)
	}

	// A new message is refused in words, and nothing is stored.
	b.allow(`status of 429 .*/messages`)
	before := b.count("#messages li.msg")
	b.typeInto("#composer-input", "and now?\r")
	b.waitText("the refusal is shown in words", "#composer-error",
		`t.includes("daily token limit of 100 tokens is reached") && t.includes("120 tokens used") && t.includes("resets")`)
	if v := b.text("#composer-error"); strings.Contains(v, "spend_limit_exceeded") || strings.Contains(v, "micros") {
		t.Errorf("the refusal shows the server's wording: %q", v)
	}
	if after := b.count("#messages li.msg"); after != before {
		t.Errorf("%d messages shown after the refusal, want %d", after, before)
	}
	b.screenshot("budget")

	// The Usage view: today's tokens against the limit, and the top bar
	// says the limit is reached.
	b.click("#nav-usage")
	b.waitText("today's tokens show against the limit", `#usage-periods [data-period="day"] tr[data-limit="tokens_per_day"] .usage-figure`,
		`t === "120 tokens / 100 tokens"`)
	b.waitText("the top bar says the limit is reached", "#usage-warn", `t.includes("daily tokens limit is reached")`)
	if got := eval[string](b, `document.querySelector('#usage-others tr[data-limit="max_chats"] td').textContent`); got != "unlimited" {
		t.Errorf("max_chats reads %q, want unlimited", got)
	}

	// The admin raises their own limit in the form: the usage is now
	// near it, not past it, and the top bar warns before it is reached.
	b.visible(`#quota-fields input[name="tokens_per_day"]`)
	if ph := eval[string](b, `document.querySelector('#quota-fields input[name="tokens_per_day"]').placeholder`); ph != "default 100" {
		t.Errorf("the field's placeholder is %q, want the default", ph)
	}
	b.replaceValue(`#quota-fields input[name="tokens_per_day"]`, "150")
	b.click("#quota-save")
	b.waitText("the limit is saved", "#quota-saved", `t.includes("Saved admin's limits")`)
	b.waitText("today's tokens show against the new limit", `#usage-periods [data-period="day"] tr[data-limit="tokens_per_day"] .usage-figure`,
		`t === "120 tokens / 150 tokens"`)
	b.waitText("the top bar warns before the limit", "#usage-warn", `t.startsWith("80% of your daily tokens limit used")`)
	if q := u.quotas(t, "admin"); q.Overrides["tokens_per_day"] != 150 || len(q.Overrides) != 1 {
		t.Errorf("admin's overrides are %v, want tokens_per_day 150 alone", q.Overrides)
	}

	// Another owner's limits.
	if code, body := do(t, http.MethodPost, u.URL+"/api/v1/tokens", u.Token, `{"owner": "bob"}`); code != http.StatusCreated {
		t.Fatalf("create bob's token: %d %s", code, body)
	}
	b.replaceValue("#usage-owner", "bob")
	b.click("#usage-owner-show")
	b.waitText("bob's limits show", "#quota-whose", `t === "bob"`)
	b.replaceValue(`#quota-fields input[name="max_chats"]`, "3")
	b.click("#quota-save")
	b.waitText("bob's limit is saved", "#quota-saved", `t.includes("Saved bob's limits")`)
	if q := u.quotas(t, "bob"); q.Overrides["max_chats"] != 3 || q.Effective["max_chats"] != 3 {
		t.Errorf("bob's quotas are %+v, want max_chats 3", q)
	}
	b.waitText("bob's other limits show the new cap", `#usage-others tr[data-limit="max_chats"] td`, `t === "3"`)
	b.screenshot("usage")
}

// ownerQuotas is the answer of GET /api/v1/owners/{owner}/quotas.
type ownerQuotas struct {
	Overrides map[string]int64 `json:"overrides"`
	Effective map[string]int64 `json:"effective"`
}

// quotas reads an owner's quotas through the API.
func (u *uiServer) quotas(t *testing.T, owner string) ownerQuotas {
	t.Helper()
	code, body := get(t, u.URL+"/api/v1/owners/"+owner+"/quotas", u.Token)
	var q ownerQuotas
	if code != http.StatusOK || json.Unmarshal([]byte(body), &q) != nil {
		t.Fatalf("GET %s's quotas: %d %s", owner, code, body)
	}
	return q
}
