package browsertest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/testutil/hookrecv"
)

// TestBrowserWebhooks: on the Webhooks page an owner adds an endpoint and
// sees its signing secret once (the one that signs the deliveries), sees a
// delivery arrive at the receiver and in the endpoint's list, redelivers
// it (the receiver gets the same webhook-id again), disables and enables
// the endpoint, rotates its secret and deletes it. A URL the server
// refuses is explained in words.
func TestBrowserWebhooks(t *testing.T) {
	t.Parallel()
	u := startUI(t, webhooksConfig)
	b := newBrowser(t, desktop)
	rc := hookrecv.New(t)
	b.signIn(u)
	b.click("#webhooks-link")
	b.visible("#webhooks-view")
	b.visible("#webhooks-empty")

	// A URL that is not http(s) is refused, in words, and nothing is added.
	b.allow(`status of 400 .*/api/v1/webhooks`)
	b.click("#webhook-new")
	b.replaceValue("#webhook-url", "ftp://example.com/hook")
	b.click("#webhook-create")
	b.waitText("the refusal is shown in words", "#webhook-form-error", `t.startsWith("Could not add the endpoint:") && t.includes("http:// or https://")`)
	if n := b.count("#webhook-list li.webhook"); n != 0 {
		t.Fatalf("%d endpoints listed after a refused one", n)
	}

	// Added for title changes only; the secret is shown once.
	b.replaceValue("#webhook-url", rc.URL())
	b.click("#webhook-all") // off: choose the types
	b.click(`#webhook-events input[value="chat.title_changed"]`)
	b.click("#webhook-create")
	b.waitJS("the secret is shown", `document.querySelector("#webhook-secret-value").value.startsWith("whsec_")`,
		`document.querySelector("#webhook-secret").outerHTML`)
	rc.SetSecret(eval[string](b, `document.querySelector("#webhook-secret-value").value`))
	b.click("#webhook-secret-copy")
	b.waitText("the copy button answers", "#webhook-secret-copy", `t !== "Copy"`)
	b.click("#webhook-secret-done")
	b.waitJS("the secret is gone from the page", `document.querySelector("#webhook-secret").hidden && document.querySelector("#webhook-secret-value").value === ""`, "")
	b.waitCount("the endpoint is listed", "#webhook-list li.webhook", 1)
	b.waitText("it lists its event", "#webhook-list .webhook-events", `t.includes("chat.title_changed")`)

	// A title change arrives at the receiver and in the list.
	b.click("#webhook-list .deliveries summary")
	id := u.createChat(t, `{"title": "before"}`)
	retitle(t, u.URL, u.Token, id, "after")
	evs := rc.WaitEvents(1, 10*time.Second)
	if e := evs[0].Body; e.Type != "chat.title_changed" || e.Data.ID != id || e.Data.Title != "after" {
		t.Fatalf("the receiver got %+v", e)
	}
	b.waitCount("the delivery is listed", `#webhook-list tr.delivery[data-status="delivered"]`, 1)
	row := `#webhook-list tr.delivery`
	if got := b.text(row + " .delivery-code"); got != "204" {
		t.Errorf("last HTTP status shown %q, want 204", got)
	}
	if got := b.text(row + " .delivery-attempts"); got != "1" {
		t.Errorf("attempts shown %q, want 1", got)
	}

	// Redeliver: the same event again.
	b.click(row + " button.redeliver")
	rc.Wait("the redelivery", deadline, func(_ []hookrecv.Event, dups int) bool { return dups == 1 })
	b.waitCount("the redelivery is listed, delivered", `#webhook-list tr.delivery[data-status="delivered"]`, 2)

	// Disable, enable.
	b.click("#webhook-list .webhook-toggle")
	b.waitText("the endpoint shows disabled", "#webhook-list .webhook-state", `t.startsWith("disabled")`)
	b.click("#webhook-list .webhook-toggle")
	b.waitText("the endpoint shows enabled", "#webhook-list .webhook-state", `t === "enabled"`)

	// Rotate: a new secret, shown once, with the old one's end.
	b.click("#webhook-list .webhook-rotate")
	b.waitJS("the new secret is shown", `document.querySelector("#webhook-secret-value").value.startsWith("whsec_")`, "")
	if s := b.text("#webhook-secret-what"); !strings.Contains(s, "old secret also signs until") {
		t.Errorf("the rotation says %q", s)
	}
	b.screenshot("webhooks")
	b.click("#webhook-secret-done")

	// Delete, after a confirmation.
	b.click("#webhook-list .webhook-delete")
	b.click("#webhook-confirm-yes")
	b.waitGone("the endpoint is deleted", "#webhook-list li.webhook")
	b.visible("#webhooks-empty")
}

// webhooksConfig lets serve deliver to the tests' receivers on 127.0.0.1
// and retries at once.
const webhooksConfig = `webhooks:
  allow_private: true
  retry_schedule: ["50ms", "50ms", "50ms"]
`

// retitle sets a chat's title: one chat.title_changed event.
func retitle(t *testing.T, base, token, id, title string) {
	t.Helper()
	if code, res := do(t, http.MethodPatch, base+"/api/v1/chats/"+id, token, fmt.Sprintf(`{"title": %q}`, title)); code != http.StatusOK {
		t.Fatalf("retitle %s: %d %s", id, code, res)
	}
}
