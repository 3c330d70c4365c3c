package browsertest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBrowserHarnessSeesPageErrors checks the browser tests' watch on the
// page: a Content-Security-Policy violation, an uncaught exception and a
// console.error are each recorded (and would fail the test), a page
// without them records nothing.
func TestBrowserHarnessSeesPageErrors(t *testing.T) {
	t.Parallel()
	b := newBrowser(t, desktop)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; script-src 'self'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/clean":
			w.Write([]byte(`<!doctype html><title>clean</title><link rel="icon" href="data:,"><p id="ok">ok</p>`))
		case "/csp":
			w.Write([]byte(`<!doctype html><title>csp</title><link rel="icon" href="data:,"><p id="ok">ok</p><script>window.ran = 1</script>`))
		case "/throws.js":
			w.Header().Set("Content-Type", "text/javascript")
			w.Write([]byte(`console.error("a console error"); throw new Error("an uncaught error");`))
		case "/throws":
			w.Write([]byte(`<!doctype html><title>throws</title><link rel="icon" href="data:,"><p id="ok">ok</p><script src="/throws.js"></script>`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)

	takeProblems := func() []string {
		b.mu.Lock()
		defer b.mu.Unlock()
		p := b.problems
		b.problems = nil
		return p
	}
	b.navigate(srv.URL + "/clean")
	b.visible("#ok")
	if p := takeProblems(); len(p) != 0 {
		t.Errorf("a clean page reported %q", p)
	}

	b.navigate(srv.URL + "/csp")
	b.visible("#ok")
	if ran := eval[bool](b, `window.ran === 1`); ran {
		t.Error("the inline script ran despite the policy")
	}
	// The report may come after the load: wait for the harness to see it.
	waitProblem(t, b, takeProblems, "Content Security Policy")

	b.navigate(srv.URL + "/throws")
	b.visible("#ok")
	waitProblem(t, b, takeProblems, "an uncaught error", "a console error")
}

// waitProblem waits (within the browser's deadline) until the recorded
// problems contain each of want, and takes them.
func waitProblem(t *testing.T, b *browser, take func() []string, want ...string) {
	t.Helper()
	var seen []string
	for {
		seen = append(seen, take()...)
		all := strings.Join(seen, "\n")
		missing := ""
		for _, w := range want {
			if !strings.Contains(all, w) {
				missing = w
			}
		}
		if missing == "" {
			return
		}
		select {
		case <-b.ctx.Done():
			t.Fatalf("the harness recorded no problem with %q; it recorded %q", missing, seen)
		default:
		}
		// The events arrive on their own goroutine; a round trip to the
		// tab lets the ones already sent be handled first.
		eval[bool](b, `true`)
	}
}
