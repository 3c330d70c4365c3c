package browsertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// sourceCard is the Sources view's card of a source.
func sourceCard(name string) string {
	return fmt.Sprintf(`#sources-list .source-card[data-source="%s"]`, name)
}

// TestBrowserTokensAndSources: the admin sees every tool source with its
// state (a Lua source connected with its tools, an MCP server whose command
// exits failed with its error), creates a token for another owner in the
// Tokens view, and that owner signs in on a fresh browser by pasting the
// link shown, sees its own (empty) chat list and no Tokens view; once the
// admin revokes the token, that browser is signed out.
func TestBrowserTokensAndSources(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "clock.lua")
	lua := `tool{name = "tick", description = "Says tick", handler = function(input) return "tick" end}`
	if err := os.WriteFile(script, []byte(lua), 0o600); err != nil {
		t.Fatal(err)
	}
	u := startUI(t, `tools:
  lua:
    - {name: clock, path: `+script+`}
  mcp:
    - name: broken
      command: ["sh", "-c", "echo this server cannot start >&2; exit 3"]
`)
	admin := newBrowser(t, desktop)
	u.createChat(t, `{"title": "the admin's own chat"}`)
	admin.signIn(u)
	admin.visible("#nav-tokens")

	admin.click("#nav-sources")
	admin.visible(sourceCard("clock") + `[data-state="ready"]`)
	if got := admin.text(sourceCard("clock") + " .source-state"); got != "connected" {
		t.Errorf("the Lua source's state says %q, want connected", got)
	}
	if got := admin.text(sourceCard("clock") + ` li[data-tool="tick"]`); !strings.Contains(got, "tick") || !strings.Contains(got, "Says tick") {
		t.Errorf("the Lua source's tool reads %q, want its name and description", got)
	}
	admin.visible(sourceCard("builtin") + ` li[data-tool="current_time"]`)
	// The MCP server may still be between two attempts: the view reads
	// the sources again while one is connecting.
	admin.visible(sourceCard("broken") + `[data-state="failed"] .source-error`)
	if got := admin.text(sourceCard("broken") + " .source-error"); got == "" {
		t.Error("the failed source shows no error")
	}
	if n := admin.count(sourceCard("broken") + " li[data-tool]"); n != 0 {
		t.Errorf("the failed source lists %d tools", n)
	}
	admin.screenshot("sources")

	admin.click("#nav-tokens")
	admin.visible(`#tokens-body tr[data-token-id]`)
	admin.typeInto("#token-owner", "bob")
	admin.typeInto("#token-name", "phone")
	admin.click("#token-create")
	admin.visible("#token-new")
	secret := eval[string](admin, `document.querySelector("#token-secret").value`)
	link := eval[string](admin, `document.querySelector("#token-link").value`)
	if !strings.HasPrefix(secret, "prl_") || link != u.URL+"/#token="+secret {
		t.Fatalf("the new token %q and its link %q; want prl_… and %s/#token=<token>", secret, link, u.URL)
	}
	if got := admin.text("#token-new-owner"); got != "bob" {
		t.Errorf("the new token is said to be %q's, want bob's", got)
	}
	bobRow := `#tokens-body tr[data-revoked="false"]:has(td.token-owner)`
	admin.waitAnyText("bob's token is listed", bobRow+" td.token-name", "phone")
	// Copy: the page may write the clipboard once granted.
	for _, perm := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(admin.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: perm}, Setting: cdpbrowser.PermissionSettingGranted, Origin: u.URL,
			BrowserContextID: chromedp.FromContext(admin.ctx).BrowserContextID}); err != nil {
			t.Fatalf("grant %s: %v", perm, err)
		}
	}
	admin.click("#token-copy-link")
	admin.waitText("the link is copied", "#token-copied", `t === "Copied."`)
	if got, err := chromedp.Run(admin.ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise)); err != nil || got != link {
		t.Errorf("the clipboard holds %q (%v), want the link", got, err)
	}
	admin.screenshot("tokens-created")

	// Bob, on a browser of his own, pastes the link into the sign-in form.
	bob := newBrowser(t, desktop)
	bob.allow(`status of 401`) // the revoked token's last request
	bob.navigate(u.URL + "/")
	bob.visible("#login-token")
	bob.replaceValue("#login-token", link)
	bob.click(`#login button[type="submit"]`)
	bob.waitJS("bob is signed in", `document.body.dataset.signedIn === "true"`, `document.querySelector("#login-error")?.textContent`)
	bob.waitText("the page says whose token it is", "#whoami", `t === "bob"`)
	bob.visible("#list-empty")
	if n := bob.count("#chat-list li.chat-item"); n != 0 {
		t.Errorf("bob's list shows %d chats, want none (the admin's are not his)", n)
	}
	if vis := eval[bool](bob, `!document.querySelector("#nav-tokens").hidden`); vis {
		t.Error("bob is offered the Tokens view")
	}
	bob.waitJS("bob's feed is connected", `document.querySelector("#feed-state")?.dataset.state === "connected"`,
		`document.querySelector("#feed-state")?.dataset.state`)

	// The admin revokes it, after a confirmation.
	admin.click(`#tokens-body tr[data-revoked="false"] button.revoke[aria-label*="bob"]`)
	admin.visible("#revoke-dialog")
	if got := admin.text("#revoke-text"); !strings.Contains(got, "bob") {
		t.Errorf("the confirmation reads %q, without the owner", got)
	}
	admin.click("#revoke-yes")
	admin.waitAnyText("bob's token is listed as revoked", `#tokens-body tr[data-revoked="true"] td.token-name`, "phone")
	bob.waitJS("bob is signed out", `document.body.dataset.signedIn === "false"`, `document.body.dataset.signedIn`)
	bob.waitText("bob is told why", "#login-error", `t.includes("refused the token")`)
}
