package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/notice"
	"github.com/parleyhq/parley/internal/testutil/parleybin"
)

// The browser tests drive the web UI of a real "parley serve" in headless
// Chromium, with an OpenAI-compatible fake as the only model. The browser
// comes from PARLEY_TEST_CHROMIUM.

// browserTimeout bounds each browser test: every wait of the test shares it.
const browserTimeout = 60 * time.Second

// Viewport sizes: a desktop window, and a phone held upright.
var (
	desktop = viewport{1280, 900}
	phone   = viewport{390, 844}
)

type viewport struct{ width, height int }

// chromium is the one headless Chromium of the test binary, started by the
// first browser test and stopped after the last (stopChromium, from
// TestMain). Each test has a browser context of its own in it (see
// newBrowser): its own storage, cookies, shared workers and permissions,
// as a fresh profile would have.
var chromium struct {
	once sync.Once
	ctx  context.Context // the browser's first tab: each test's context is made from it
	stop func()
	err  error
}

// sharedChromium starts the package's Chromium once and returns its root
// context.
func sharedChromium(t *testing.T, exe string) context.Context {
	t.Helper()
	chromium.once.Do(func() {
		dir, err := os.MkdirTemp("", "parley-chromium-")
		if err != nil {
			chromium.err = err
			return
		}
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(exe),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-extensions", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(desktop.width, desktop.height),
		)
		ctx, cancel := chromedp.NewContext(allocCtx)
		chromium.stop = func() {
			cancel() // the allocator's cancel waits for the process to end
			cancelAlloc()
			os.RemoveAll(dir)
		}
		if err := chromedp.Do(ctx); err != nil {
			chromium.err = fmt.Errorf("start %s: %w", exe, err)
			return
		}
		chromium.ctx = ctx
	})
	if chromium.err != nil {
		t.Fatal(chromium.err)
	}
	return chromium.ctx
}

// stopChromium stops the package's Chromium, if a test started it.
func stopChromium() {
	if chromium.stop != nil {
		chromium.stop()
	}
}

// browser is one browser context with one tab in the package's Chromium,
// for one test. It records
// what the page reports as an error (uncaught exceptions, console.error and
// console.assert calls, error entries of the browser log, security entries
// such as CSP violations) and fails the test with them at its end.
type browser struct {
	t   *testing.T
	tab context.Context // the tab, until the test ends
	ctx context.Context // the tab, until the test's deadline

	mu       sync.Mutex
	done     bool             // the test ended: record nothing more
	problems []string         // what the page reported as errors
	allowed  []*regexp.Regexp // problems a test expects (see allow)

	kept string // where a failure's evidence goes without $PARLEY_TEST_SCREENSHOTS (see save)
}

// newBrowser opens a tab whose page is vp, in a browser context of its own
// in the package's Chromium (started by the first test that asks). The
// context, its tabs and its storage are gone when the test ends.
func newBrowser(t *testing.T, vp viewport) *browser {
	t.Helper()
	exe := notice.Env(t, "PARLEY_TEST_CHROMIUM", "the web UI's browser tests are skipped")
	root := sharedChromium(t, exe)
	b := &browser{t: t}
	tabCtx, cancelTab := chromedp.NewContext(root,
		chromedp.WithNewBrowserContext(),
		chromedp.WithListener(b.listen),
	)
	ctx, cancelCtx := context.WithTimeout(tabCtx, browserTimeout)
	t.Cleanup(func() {
		cancelCtx()
		cancelTab()
		b.mu.Lock()
		defer b.mu.Unlock()
		b.done = true
		for _, p := range b.problems {
			t.Errorf("the page reported: %s", p)
		}
	})
	// The first action makes the context and its tab; it is bound to
	// tabCtx, which lives until the cleanup, not to the test's deadline.
	if err := chromedp.Do(tabCtx); err != nil {
		t.Fatalf("open a tab in %s: %v", exe, err)
	}
	b.tab, b.ctx = tabCtx, ctx
	// The window's frame takes part of its size: the page gets all of it.
	b.do("set the viewport", chromedp.EmulateViewport(int64(vp.width), int64(vp.height)))
	return b
}

// allow lets the page report problems matching re without failing the
// test: a test that provokes an error (a refused token) allows the
// browser's own line about it, and nothing else.
func (b *browser) allow(re string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allowed = append(b.allowed, regexp.MustCompile(re))
}

// listen runs in the tab's event loop: it only records.
func (b *browser) listen(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		p = "uncaught exception: " + exceptionText(ev.ExceptionDetails)
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var args []string
		for _, a := range ev.Args {
			if len(a.Value) > 0 {
				args = append(args, string(a.Value))
			} else {
				args = append(args, a.Description)
			}
		}
		p = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
	case *log.EventEntryAdded:
		e := ev.Entry
		if e.Level != log.EntryLevelError && e.Source != log.EntrySourceSecurity {
			return
		}
		p = fmt.Sprintf("browser log (%s, %s): %s %s", e.Source, e.Level, e.Text, e.URL)
	default:
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	for _, re := range b.allowed {
		if re.MatchString(p) {
			b.t.Logf("the page reported, as the test expects: %s", p)
			return
		}
	}
	b.problems = append(b.problems, p)
}

// exceptionText is the message of an exception and where it was thrown.
func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "(no details)"
	}
	s := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		s += " " + d.Exception.Description
	}
	return fmt.Sprintf("%s (%s:%d:%d)", s, d.URL, d.LineNumber+1, d.ColumnNumber+1)
}

// do runs actions, failing the test with what was being done.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.fail("%s: %v", what, err)
	}
}

// fail stops the test, with a screenshot and the page's HTML saved for
// the reader.
func (b *browser) fail(format string, args ...any) {
	b.t.Helper()
	msg := fmt.Sprintf(format, args...)
	// The test's context may be what ran out: give the evidence its own.
	ctx, cancel := context.WithTimeout(b.tab, 5*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		msg += "\nscreenshot: " + b.save("failure.png", png)
	}
	if html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); err == nil {
		msg += "\npage: " + b.save("failure.html", []byte(html))
	}
	b.mu.Lock()
	for _, p := range b.problems {
		msg += "\nthe page reported: " + p
	}
	b.mu.Unlock()
	b.t.Fatal(msg)
}

// navigate loads url and waits until the page's DOM is ready.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.do("navigate to "+url, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body")))
}

// visible waits until the element sel matches is visible.
func (b *browser) visible(sel string) {
	b.t.Helper()
	b.do("wait for "+sel+" to be visible", chromedp.WaitVisible(chromedp.CSS(sel)))
}

// click waits until sel is visible and clicks it.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// typeInto types text into the element sel matches, as keystrokes ("\r"
// is Enter).
func (b *browser) typeInto(sel, text string) {
	b.t.Helper()
	b.do("type into "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.SendKeys(chromedp.CSS(sel), text))
}

// replaceValue sets the value of the field sel matches, as a paste over
// its whole content does: the field then fires input and change.
func (b *browser) replaceValue(sel, value string) {
	b.t.Helper()
	b.visible(sel)
	expr := fmt.Sprintf(`(() => {
		const el = document.querySelector(%s);
		el.focus();
		el.value = %s;
		el.dispatchEvent(new Event("input", {bubbles: true}));
		el.dispatchEvent(new Event("change", {bubbles: true}));
	})()`, jsString(sel), jsString(value))
	b.do("set the value of "+sel, chromedp.Evaluate[chromedp.Void](expr))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fail("evaluate %s: %v", expr, err)
	}
	return v
}

// count is how many elements sel matches now.
func (b *browser) count(sel string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel)))
}

// text is the text content of the first element sel matches now, "" if
// none does.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`document.querySelector(%s)?.textContent ?? ""`, jsString(sel)))
}

// waitJS waits until the JavaScript expression cond is true in the page,
// checking at every DOM change (and every 100 ms, for state outside the
// DOM), and fails the test at the deadline with what and the value of
// show, an expression telling what the page has instead.
//
// The check runs in the page as a promise evaluated through the DevTools
// protocol, so the page's Content-Security-Policy does not apply to it
// (chromedp.Poll builds its predicate with new Function, which a policy
// without 'unsafe-eval' refuses). A reload destroys the promise; the wait
// starts again in the new document.
func (b *browser) waitJS(what, cond, show string) {
	b.t.Helper()
	expr := fmt.Sprintf(`new Promise((resolve) => {
		const check = () => { try { return !!(%s); } catch (e) { return false; } };
		if (check()) { resolve(true); return; }
		const done = () => { obs.disconnect(); clearInterval(timer); resolve(true); };
		const obs = new MutationObserver(() => { if (check()) done(); });
		obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
		const timer = setInterval(() => { if (check()) done(); }, 100);
	})`, cond)
	for {
		_, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](expr, chromedp.EvalAwaitPromise))
		if err == nil {
			return
		}
		if b.ctx.Err() != nil {
			break
		}
		var exc *chromedp.ExceptionError
		if errors.As(err, &exc) || !documentGone.MatchString(err.Error()) {
			b.fail("wait for %s: %v", what, err)
		}
		// The document went away under the promise (a reload): wait in
		// the new one, once it is there.
		if err := chromedp.Do(b.ctx, chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
			break
		}
	}
	got := "?"
	ctx, cancel := context.WithTimeout(b.tab, 5*time.Second)
	defer cancel()
	if show != "" {
		if v, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](show)); err == nil {
			got = string(v)
		} else {
			got = err.Error()
		}
	}
	b.fail("%s: not so within %s; the page has %s", what, browserTimeout, got)
}

// documentGone matches the errors of an evaluation whose document went
// away under it.
var documentGone = regexp.MustCompile(`(?i)execution context|context was destroyed|promise was collected|target closed|inspected target navigated`)

// waitText waits until the text content of the first element sel matches
// satisfies want (a JavaScript expression over the string t).
func (b *browser) waitText(what, sel, want string) {
	b.t.Helper()
	q := fmt.Sprintf(`document.querySelector(%s)`, jsString(sel))
	b.waitJS(what, fmt.Sprintf(`((t) => t !== null && (%s))(%s?.textContent ?? null)`, want, q),
		fmt.Sprintf(`%s?.textContent ?? "(no %s)"`, q, strings.ReplaceAll(sel, `"`, `'`)))
}

// waitCount waits until sel matches exactly n elements.
func (b *browser) waitCount(what, sel string, n int) {
	b.t.Helper()
	q := fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel))
	b.waitJS(what, fmt.Sprintf(`%s === %d`, q, n), q)
}

// waitGone waits until sel matches nothing.
func (b *browser) waitGone(what, sel string) {
	b.t.Helper()
	b.waitCount(what, sel, 0)
}

// screenshot saves a full-page PNG named after the test and scenario into
// $PARLEY_TEST_SCREENSHOTS; without it, it takes none (a failure's
// evidence is saved in any case, see fail).
func (b *browser) screenshot(scenario string) {
	b.t.Helper()
	if os.Getenv("PARLEY_TEST_SCREENSHOTS") == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fail("screenshot %s: %v", scenario, err)
	}
	b.t.Logf("screenshot %s: %s", scenario, b.save(scenario+".png", png))
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// save writes data as <test>-<name> into $PARLEY_TEST_SCREENSHOTS
// (created if missing) and returns the path. Without it, the evidence of
// a failure goes to a directory of its own under the system's temporary
// directory, which stays for the reader.
func (b *browser) save(name string, data []byte) string {
	dir := os.Getenv("PARLEY_TEST_SCREENSHOTS")
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Errorf("screenshot directory: %v", err)
			return ""
		}
	} else {
		if b.kept == "" {
			d, err := os.MkdirTemp("", "parley-browser-")
			if err != nil {
				b.t.Errorf("failure directory: %v", err)
				return ""
			}
			b.kept = d
		}
		dir = b.kept
	}
	path := filepath.Join(dir, unsafeName.ReplaceAllString(b.t.Name()+"-"+name, "_"))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.t.Errorf("save %s: %v", path, err)
	}
	return path
}

// docScreenshot saves a full-page PNG as file, named as the
// documentation links it (no test name before it), into
// $PARLEY_TEST_SCREENSHOTS; without it, it takes none.
func (b *browser) docScreenshot(file string) {
	b.t.Helper()
	dir := os.Getenv("PARLEY_TEST_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fail("screenshot %s: %v", file, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Errorf("screenshot directory: %v", err)
		return
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Errorf("save %s: %v", path, err)
	}
	b.t.Logf("screenshot %s", path)
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// uiServer is a "parley serve" whose only model is an OpenAI-compatible
// fake, for the browser tests.
type uiServer struct {
	*server
	fake *llmtest.OpenAIChat
	link string // the sign-in link serve printed: http://ADDR/#token=...

	// How serve was started, for a test that starts it again.
	dir  string
	env  []string
	args []string
}

// startUI starts a serve of the test's own, for a test that needs extra
// configuration, restarts serve or looks at every owner (sharedUI serves
// the others): on a fresh SQLite database with the fake as its model, and
// extraConfig appended to its configuration file. When the test ends,
// after the browser is gone (it is started later, so stopped first), the
// server is stopped with SIGTERM and must exit 0, and the histories it
// wrote are checked. A test that starts serve again (see restart) sets
// u.server: that one is stopped then.
func startUI(t *testing.T, extraConfig ...string) *uiServer {
	t.Helper()
	// Skip (or fail, in CI) before starting anything without a browser.
	notice.Env(t, "PARLEY_TEST_CHROMIUM", "the web UI's browser tests are skipped")
	fake := llmtest.NewOpenAIChat(t)
	dir := t.TempDir()
	path := parleybin.FakeModelConfig(t, dir, fake.URL, strings.Join(extraConfig, ""))
	dataDir := filepath.Join(dir, "data")
	// Registered before the server's own cleanup, so it runs after it.
	t.Cleanup(func() { parleybin.CheckHistories(t, filepath.Join(dataDir, "parley.db")) })
	env := []string{parleybin.FakeKeyEnv + "=test-key"}
	args := []string{"--config", path, "--data-dir", dataDir}
	s := startServe(t, dir, env, args...)
	if s.Token == "" {
		t.Fatalf("serve printed no admin token\nstdout:\n%s", s.Stdout)
	}
	l, ok := s.Stdout.WaitLine("web UI: ", s.Exited, deadline)
	if !ok {
		t.Fatalf("serve printed no web UI link\nstdout:\n%s", s.Stdout)
	}
	u := &uiServer{server: s, fake: fake, link: strings.TrimPrefix(l, "web UI: "), dir: dir, env: env, args: args}
	t.Cleanup(func() {
		s := u.server // the one running now: a test may have started serve again
		select {
		case <-s.Exited:
			return // a failed start; its own cleanup reports nothing more
		default:
		}
		// A restarted serve has no cleanup of its own that kills it.
		defer func() {
			select {
			case <-s.Exited:
			default:
				s.Cmd.Process.Kill()
				<-s.Exited
			}
		}()
		if code := s.Stop(); code != 0 {
			t.Errorf("serve exited %d after SIGTERM\nstderr:\n%s", code, s.Stderr)
		}
	})
	return u
}

// createChat creates a chat through the API, as another client would, and
// returns its id. body is the JSON of POST /api/v1/chats; give it a title,
// or the model is also asked for one, which the scripted turns do not
// expect.
func (u *uiServer) createChat(t *testing.T, body string) string {
	t.Helper()
	code, res := do(t, http.MethodPost, u.URL+"/api/v1/chats", u.Token, body)
	var c chat.Chat
	if code != http.StatusCreated || json.Unmarshal([]byte(res), &c) != nil || c.ID == "" {
		t.Fatalf("create chat %s: %d %s", body, code, res)
	}
	return c.ID
}

// chatURL is the UI's address of a chat.
func (u *uiServer) chatURL(id string) string { return u.URL + "/#/chats/" + id }

// signIn loads the sign-in link and waits until the UI is signed in.
func (b *browser) signIn(u *uiServer) {
	b.t.Helper()
	b.navigate(u.link)
	b.waitJS("the UI signed in with the link's token", `document.body.dataset.signedIn === "true"`,
		`document.body.outerHTML.slice(0, 300)`)
}

// openChat signs in and opens the chat id.
func (b *browser) openChat(u *uiServer, id string) {
	b.t.Helper()
	b.signIn(u)
	b.navigate(u.chatURL(id))
	b.visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, id))
}

// modelRequest is the part of a Chat Completions request the tests read.
type modelRequest struct {
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
}

// modelRequests decodes what the fake received so far.
func modelRequests(t *testing.T, fake *llmtest.OpenAIChat) []modelRequest {
	t.Helper()
	var out []modelRequest
	for i, r := range fake.Requests() {
		var m modelRequest
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("model request %d: %v\n%s", i+1, err, r.Body)
		}
		out = append(out, m)
	}
	return out
}
