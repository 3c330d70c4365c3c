package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/notice"
	"github.com/parleyhq/parley/internal/testutil/parleybin"
)

// The tests that need no configuration of their own share one "parley
// serve" (sharedUI), started by the first of them and stopped by TestMain
// (stopShared), which then checks the histories it wrote. Each test is an
// owner of its own there, so it sees only its own chats, and has a fake
// model of its own: serve's only model is a proxy (the lane) that forwards
// to the fake of the shared test running now. Shared tests take the lane
// one at a time (they still run beside the tests with a serve of their
// own), and give it up only once none of their chats is pending or
// running, so no model call of one test reaches the next one's fake.
var shared struct {
	once sync.Once
	err  error
	srv  *server
	dir  string // serve's directory, removed by stopShared
	db   string // serve's SQLite database
	link string // the admin's sign-in link, to check the owners' against

	proxy *httptest.Server // the model serve calls: forwards to shared.fake

	lane  sync.Mutex // held by the shared test running now
	mu    sync.Mutex
	fake  *llmtest.OpenAIChat // the holder's fake; nil between tests
	t     *testing.T          // the holder
	stray []string            // model requests that came when no test held the lane
	owner int                 // how many owners were made
}

// startShared starts the shared serve and the proxy in front of the
// tests' fakes.
func startShared() error {
	shared.proxy = httptest.NewServer(http.HandlerFunc(forwardToFake))
	dir, err := os.MkdirTemp("", "parley-browser-serve-")
	if err != nil {
		return err
	}
	shared.dir = dir
	path := parleybin.FakeModelConfig(&mainT{}, dir, shared.proxy.URL+"/v1", "")
	dataDir := filepath.Join(dir, "data")
	shared.db = filepath.Join(dataDir, "parley.db")
	cmd := command(dir, []string{parleybin.FakeKeyEnv + "=test-key"},
		"serve", "--listen", "127.0.0.1:0", "--config", path, "--data-dir", dataDir)
	s := &server{Cmd: cmd, Stdout: parleybin.NewOutput(), Stderr: parleybin.NewOutput(), Exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		cmd.Wait()
		close(s.Exited)
	}()
	shared.srv = s
	addr, ok := s.Stdout.WaitLine("parley listening on http://", s.Exited, deadline)
	l, ok2 := s.Stdout.WaitLine("web UI: ", s.Exited, deadline)
	if !ok || !ok2 {
		return fmt.Errorf("the shared serve printed no address or web UI link\nstdout:\n%s\nstderr:\n%s", s.Stdout, s.Stderr)
	}
	shared.link = strings.TrimPrefix(l, "web UI: ")
	tok, _ := s.Stdout.Line("admin token: ")
	s.URL = strings.TrimPrefix(addr, "parley listening on ")
	s.Token = strings.TrimPrefix(tok, "admin token: ")
	if s.URL == "" || s.Token == "" {
		return fmt.Errorf("the shared serve printed no address or admin token\nstdout:\n%s", s.Stdout)
	}
	if want := s.URL + "/#token=" + s.Token; shared.link != want {
		return fmt.Errorf("the shared serve's link is %q, want %q: the owners' links are made alike", shared.link, want)
	}
	return nil
}

// forwardToFake passes a model request of serve to the fake of the test
// holding the lane, streaming its answer back as it comes. A request while
// no test holds it is answered 400 (so serve does not retry it) and fails
// the package in stopShared.
func forwardToFake(w http.ResponseWriter, r *http.Request) {
	shared.mu.Lock()
	fake := shared.fake
	if fake == nil {
		shared.stray = append(shared.stray, fmt.Sprintf("%s %s at %s", r.Method, r.URL.Path, time.Now().Format(time.RFC3339Nano)))
	}
	shared.mu.Unlock()
	if fake == nil {
		http.Error(w, `{"error":{"message":"no browser test holds the shared model","type":"invalid_request_error","param":null,"code":null}}`, http.StatusBadRequest)
		return
	}
	target, err := url.Parse(fake.URL)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// The body is read first, whole: the server reading the rest of a
	// request it answers would race the transport sending it on.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, target.Scheme+"://"+target.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out.Header = r.Header.Clone()
	res, err := toFakes.RoundTrip(out)
	if err != nil {
		holderLogf(fake, "model request not forwarded to the test's fake: %v", err)
		http.Error(w, "forward to the test's fake: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	holderLogf(fake, "model request forwarded to the test's fake: %d", res.StatusCode)
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	// The headers and each piece of the body go on at once, as the fake
	// sends them: a held turn has sent its headers already.
	w.WriteHeader(res.StatusCode)
	flusher := w.(http.Flusher)
	flusher.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return
			}
			flusher.Flush()
		}
		if err != nil {
			if err != io.EOF {
				holderLogf(fake, "model answer cut: %v (serve's request: %v)", err, r.Context().Err())
				// The fake dropped the connection: so does the proxy.
				panic(http.ErrAbortHandler)
			}
			return
		}
	}
}

// toFakes carries the forwarded requests. It is not http.DefaultTransport,
// whose idle connections and dials in progress every httptest server's
// Close (each test's fake, for one) closes and cancels.
var toFakes = &http.Transport{}

// holderLogf logs to the test whose fake is fake, if it still holds the
// lane (a test that has ended takes no more logs).
func holderLogf(fake *llmtest.OpenAIChat, format string, args ...any) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.fake == fake && shared.t != nil {
		shared.t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

// sharedUI is startUI for a test that needs no configuration of its own,
// does not stop serve, and looks at nothing beyond its own owner: it takes
// the shared serve's lane and returns a view of that serve as a new owner,
// with a fake model of its own. When the test ends, after its browser is
// gone, its chats must settle (none pending or running) before the lane
// passes on.
func sharedUI(t *testing.T) *uiServer {
	t.Helper()
	notice.Env(t, "PARLEY_TEST_CHROMIUM", "the web UI's browser tests are skipped")
	shared.once.Do(func() { shared.err = startShared() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	shared.lane.Lock()
	// Runs last: after the settling below and after the fake is closed.
	t.Cleanup(func() {
		shared.mu.Lock()
		shared.fake, shared.t = nil, nil
		shared.mu.Unlock()
		shared.lane.Unlock()
	})
	fake := llmtest.NewOpenAIChat(t)
	shared.mu.Lock()
	shared.fake, shared.t = fake, t
	shared.owner++
	owner := ownerName(shared.owner, t.Name())
	shared.mu.Unlock()
	u := &uiServer{fake: fake}
	logFrom := len(shared.srv.Stderr.String())
	t.Cleanup(func() {
		if u.server != nil {
			waitSettled(t, u)
		}
		if t.Failed() {
			t.Logf("the shared serve's log while the test ran:\n%s", shared.srv.Stderr.String()[logFrom:])
		}
	})
	code, body := do(t, http.MethodPost, shared.srv.URL+"/api/v1/tokens", shared.srv.Token,
		fmt.Sprintf(`{"owner": %q, "name": "browser test"}`, owner))
	var tok struct {
		Token string `json:"token"`
	}
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &tok) != nil || tok.Token == "" {
		t.Fatalf("create a token for the owner %s: %d %s", owner, code, body)
	}
	// A copy of the shared process with the owner's token: the test's u.URL
	// and u.Token are the owner's view of the shared serve.
	view := *shared.srv
	view.Token = tok.Token
	u.server = &view
	u.link = view.URL + "/#token=" + tok.Token
	return u
}

// ownerName is the owner of the nth shared test: its number and as much
// of its name as an owner name takes.
func ownerName(n int, test string) string {
	name := fmt.Sprintf("t%02d-%s", n, strings.Trim(unsafeOwner.ReplaceAllString(strings.ToLower(test), "-"), "-"))
	return name[:min(len(name), 63)]
}

var unsafeOwner = regexp.MustCompile(`[^a-z0-9_.-]+`)

// waitSettled waits until none of the owner's chats is pending or running,
// so no model call of the test is still to come; it fails the test with
// the chats that do not settle. It follows the owner's feed, opened before
// the chats at work are listed, so no change between the two is missed.
func waitSettled(t *testing.T, u *uiServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline) // in a cleanup: the test's context is done
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.URL+"/api/v1/chats/watch", nil)
	req.Header.Set("Authorization", "Bearer "+u.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("open the owner's feed: %v %v", err, resp)
		return
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 4<<20)
	if !lines.Scan() || lines.Text() != ": connected" {
		t.Errorf("the owner's feed did not start: %q %v", lines.Text(), lines.Err())
		return
	}
	busy := atWork(t, u)
	for len(busy) > 0 && lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Kind string `json:"kind"`
			Chat struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"chat"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			t.Errorf("feed event %s", data)
			return
		}
		switch {
		case ev.Kind == "resync":
			t.Errorf("the owner's feed asked for a resync while the test waited for its chats")
			return
		case ev.Kind == "deleted" || (ev.Chat.Status != "pending" && ev.Chat.Status != "running"):
			delete(busy, ev.Chat.ID)
		}
	}
	if len(busy) > 0 {
		t.Errorf("the test's chats did not settle within %s (the shared serve's next test would get their model calls): %v", deadline, busy)
	}
}

// atWork lists the owner's chats that are pending or running: id to status.
func atWork(t *testing.T, u *uiServer) map[string]string {
	t.Helper()
	code, body := get(t, u.URL+"/api/v1/chats?status=pending,running&archived=any&limit=500", u.Token)
	var res struct {
		Chats []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"chats"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil {
		t.Errorf("list the chats still at work: %d %s", code, body)
		return nil
	}
	busy := map[string]string{}
	for _, c := range res.Chats {
		busy[c.ID] = c.Status
	}
	return busy
}

// stopShared stops the shared serve, if a test started it, and checks the
// histories it wrote; it reports whether everything was as it should be.
func stopShared() bool {
	if shared.proxy != nil {
		defer shared.proxy.Close()
	}
	s := shared.srv
	if s == nil {
		return true
	}
	defer os.RemoveAll(shared.dir)
	ok := true
	s.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.Exited:
		if code := s.Cmd.ProcessState.ExitCode(); code != 0 {
			fmt.Fprintf(os.Stderr, "the shared serve exited %d after SIGTERM\nstderr:\n%s\n", code, s.Stderr)
			ok = false
		}
	case <-time.After(deadline):
		s.Cmd.Process.Kill()
		<-s.Exited
		fmt.Fprintf(os.Stderr, "the shared serve did not exit within %s of SIGTERM\nstderr:\n%s\n", deadline, s.Stderr)
		ok = false
	}
	shared.mu.Lock()
	stray := shared.stray
	shared.mu.Unlock()
	for _, r := range stray {
		fmt.Fprintf(os.Stderr, "the shared serve called the model while no test held it: %s\n", r)
		ok = false
	}
	var check mainT
	parleybin.CheckHistories(&check, shared.db)
	return ok && !check.failed
}

// mainT is the testing.TB of what TestMain does outside any test (writing
// the shared serve's configuration, checking its histories): it prints
// what would be logged and remembers a failure. Only the methods those
// helpers call are implemented.
type mainT struct {
	testing.TB
	failed bool
}

func (*mainT) Helper()                         {}
func (*mainT) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (m *mainT) Errorf(format string, args ...any) {
	m.failed = true
	fmt.Fprintf(os.Stderr, "shared serve: "+format+"\n", args...)
}
func (m *mainT) Fatal(args ...any) {
	m.failed = true
	panic(fmt.Sprint(args...))
}
