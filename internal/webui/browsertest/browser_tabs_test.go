package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// streamCounter is a plain HTTP/1.1 proxy in front of serve that counts
// the event streams open through it now.
type streamCounter struct {
	*httptest.Server
	mu   sync.Mutex
	open int
	max  int
	log  []string // the streams opened and closed, shown if the test fails
}

func newStreamCounter(t *testing.T, target string) *streamCounter {
	t.Helper()
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(to)
	proxy.FlushInterval = -1 // events as they come
	c := &streamCounter{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stream") || r.URL.Path == "/api/v1/chats/watch" || r.URL.Path == "/api/v1/chats/streams" {
			c.mu.Lock()
			c.open++
			c.max = max(c.max, c.open)
			c.log = append(c.log, fmt.Sprintf("stream opened (%d open): %s", c.open, r.URL.Path))
			c.mu.Unlock()
			defer func() {
				c.mu.Lock()
				c.open--
				c.log = append(c.log, fmt.Sprintf("stream closed (%d open): %s", c.open, r.URL.Path))
				c.mu.Unlock()
			}()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Logf("the proxy saw:\n%s", strings.Join(c.log, "\n"))
		}
	})
	return c
}

func (c *streamCounter) counts() (open, most int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.max
}

// newTab opens another tab in b's browser (same profile: same storage and
// the same shared stream worker), watched for page errors like b's, until
// b's deadline.
func (b *browser) newTab() *browser {
	b.t.Helper()
	nb := &browser{t: b.t, kept: b.kept}
	tabCtx, cancelTab := chromedp.NewContext(b.tab, chromedp.WithListener(nb.listen))
	dl, _ := b.ctx.Deadline()
	ctx, cancel := context.WithDeadline(tabCtx, dl)
	b.t.Cleanup(func() {
		cancel()
		cancelTab()
		nb.mu.Lock()
		defer nb.mu.Unlock()
		nb.done = true
		for _, p := range nb.problems {
			b.t.Errorf("a tab reported: %s", p)
		}
	})
	if err := chromedp.Do(tabCtx); err != nil {
		b.t.Fatalf("open a tab: %v", err)
	}
	nb.tab, nb.ctx = tabCtx, ctx
	return nb
}

// waitConnected waits until the tab's owner feed and open chat stream are
// both live.
func (b *browser) waitConnected() {
	b.t.Helper()
	b.waitJS("the feed and the chat stream are connected",
		`document.querySelector("#feed-state")?.dataset.state === "connected" && document.querySelector("#stream-state")?.dataset.state === "connected"`,
		`[document.querySelector("#feed-state")?.dataset.state, document.querySelector("#stream-state")?.dataset.state].join(" / ")`)
}

// TestBrowserSevenTabs opens seven tabs of one browser over plain HTTP/1.1,
// on two chats: the tabs share their streams (the feed's connection and
// one for the chats), every tab on a chat sees its answer stream in once, the seventh
// joining while the answer streams (it sees what was written so far), and
// an API request of the seventh tab is answered at once rather than
// waiting for a free connection.
func TestBrowserSevenTabs(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	proxy := newStreamCounter(t, u.URL)
	first := newBrowser(t, desktop)

	chats := []string{
		u.createChat(t, `{"title": "first of two"}`),
		u.createChat(t, `{"title": "second of two"}`),
	}
	want := 2 // the feed and the chats' multiplexed stream
	first.navigate(proxy.URL + "/#token=" + u.Token)
	first.waitJS("the UI signed in with the link's token", `document.body.dataset.signedIn === "true"`, `document.body.dataset.signedIn`)
	tabs := []*browser{first}
	for len(tabs) < 7 {
		tabs = append(tabs, first.newTab())
	}
	on := func(i int) string { return chats[i%2] } // tabs 0, 2, 4, 6 on the first chat
	open := func(i int) {
		t.Helper()
		tabs[i].navigate(proxy.URL + "/#/chats/" + on(i))
		tabs[i].visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, on(i)))
		tabs[i].waitConnected()
	}
	for i := range 6 {
		open(i)
	}
	// Old connections the worker replaced may still be closing: the count
	// settles at one stream per distinct URL.
	threeStreams := func(when string) {
		t.Helper()
		waitFor(t, first, fmt.Sprintf("%d stream connections %s", want, when), func() bool { n, _ := proxy.counts(); return n == want })
	}
	threeStreams("with six tabs")

	for n, id := range chats {
		gate, started := make(chan struct{}), make(chan struct{})
		answer := fmt.Sprintf("the answer of chat %d, streamed to every tab", n+1)
		u.fake.Push(llmtest.Turn{Text: answer, ChunkSize: 4, Gate: gate, GateAfter: 4, Started: started})
		if code, body := do(t, http.MethodPost, u.URL+"/api/v1/chats/"+id+"/messages", u.Token, `{"content": "hello, tabs"}`); code != http.StatusAccepted {
			t.Fatalf("post a message: %d %s", code, body)
		}
		first.waitClosed("the model is called", started)
		for i := range 6 {
			if on(i) == id {
				tabs[i].waitAnyText("the first words stream in", draftText, answer[:8])
			}
		}
		if n == 0 {
			// The seventh tab joins the chat mid-answer: the worker opens
			// the chat's stream again for it, from its own start.
			open(6)
			tabs[6].waitAnyText("the seventh tab sees the answer so far", draftText, answer[:8])
			threeStreams("with seven tabs")
			// Its API request is answered while all seven follow.
			models := `fetch("/api/v1/models", {headers: {Authorization: "Bearer " + localStorage.getItem("parley.token")}}).then((r) => r.status)`
			if code, err := chromedp.Run(tabs[6].ctx, chromedp.Evaluate[int](models, chromedp.EvalAwaitPromise)); err != nil || code != http.StatusOK {
				t.Fatalf("GET /api/v1/models from the seventh tab: %d, %v", code, err)
			}
		}
		close(gate)
		for i, tab := range tabs {
			if on(i) == id {
				tab.waitAnyText("the answer in every tab on the chat", answerText, answer)
				tab.waitStatus("waiting")
			}
		}
	}
	if open, most := proxy.counts(); open != want {
		t.Errorf("%d stream connections open after the runs (at most %d at once), want %d", open, most, want)
	} else {
		t.Logf("seven tabs: %d stream connections open, at most %d at once", open, most)
	}
	for i, tab := range tabs {
		if n := tab.count(userMsg); n != 1 {
			t.Errorf("tab %d shows %d user messages, want 1", i+1, n)
		}
		if n := tab.count(answerText); n != 1 {
			t.Errorf("tab %d shows %d answers, want 1", i+1, n)
		}
	}
	first.screenshot("seven-tabs")
}

// waitFor waits, within b's deadline, until cond holds; cond reads state
// of the test (not of the page), checked at each round trip to the page.
func waitFor(t *testing.T, b *browser, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-b.ctx.Done():
			t.Fatalf("%s: not within %s", what, browserTimeout)
		default:
		}
		// A round trip to the page, which answers after 50 ms: a poll.
		if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`new Promise((r) => setTimeout(() => r(true), 50))`, chromedp.EvalAwaitPromise)); err != nil && b.ctx.Err() == nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// TestBrowserTenTabsTenChats opens ten tabs of one browser over plain
// HTTP/1.1, each on a chat of its own, and sends a message in each: every
// answer arrives, because the tabs' chat streams share one connection (the
// feed another), far from the browser's six per server. It needs the
// server's multiplexed stream.
func TestBrowserTenTabsTenChats(t *testing.T) {
	t.Parallel()
	u := sharedUI(t)
	var chats []string
	for i := range 10 {
		chats = append(chats, u.createChat(t, fmt.Sprintf(`{"title": "chat %d of ten"}`, i+1)))
	}
	proxy := newStreamCounter(t, u.URL)
	first := newBrowser(t, desktop)
	first.navigate(proxy.URL + "/#token=" + u.Token)
	first.waitJS("the UI signed in with the link's token", `document.body.dataset.signedIn === "true"`, `document.body.dataset.signedIn`)
	tabs := []*browser{first}
	for len(tabs) < len(chats) {
		tabs = append(tabs, first.newTab())
	}
	for i, tab := range tabs {
		tab.navigate(proxy.URL + "/#/chats/" + chats[i])
		tab.visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, chats[i]))
		tab.waitConnected()
	}
	waitFor(t, first, "two stream connections (the feed and the chats')", func() bool { n, _ := proxy.counts(); return n == 2 })
	for i, tab := range tabs {
		answer := fmt.Sprintf("the answer in chat %d", i+1)
		u.fake.Push(llmtest.Turn{Text: answer})
		tab.typeInto("#composer-input", fmt.Sprintf("hello from tab %d\r", i+1))
		tab.waitAnyText("the answer arrives in its tab", answerText, answer)
		tab.waitStatus("waiting")
	}
	// Every tab still follows its chat: a message sent elsewhere shows.
	for i, id := range chats {
		u.fake.Push(llmtest.Turn{Text: fmt.Sprintf("the second answer in chat %d", i+1)})
		if code, body := do(t, http.MethodPost, u.URL+"/api/v1/chats/"+id+"/messages", u.Token, `{"content": "again"}`); code != http.StatusAccepted {
			t.Fatalf("post a message: %d %s", code, body)
		}
		tabs[i].waitAnyText("the answer to a message sent elsewhere arrives", answerText, fmt.Sprintf("the second answer in chat %d", i+1))
	}
	if open, most := proxy.counts(); open != 2 {
		t.Errorf("%d stream connections open (at most %d at once), want 2", open, most)
	}
	for i, tab := range tabs {
		if n := tab.count(answerText); n != 2 {
			t.Errorf("tab %d shows %d answers, want 2", i+1, n)
		}
	}
}
