package hookrecv

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// secret is a Standard Webhooks secret for the tests.
const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// post sends body to rc signed for webhook-id id, or with a wrong
// signature, and returns the status.
func post(t *testing.T, rc *Receiver, id, body string, signed bool) int {
	t.Helper()
	now := time.Now()
	sig := "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	if signed {
		var err error
		if sig, err = rc.Sign(id, now, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, rc.URL(), bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func body(title string) string {
	return fmt.Sprintf(`{"type":"chat.title_changed","timestamp":"2026-01-01T00:00:00Z","data":{"id":"c1","title":%q}}`, title)
}

// A receiver records each event once per webhook-id, counts the repeats
// and the requests, and lets Before deal with a request instead.
func TestReceiverRecordsOncePerID(t *testing.T) {
	rc := New(t)
	rc.SetSecret(secret)
	var mu sync.Mutex
	refuse := map[string]bool{"msg_3": true}
	rc.Before = func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if refuse[r.Header.Get("webhook-id")] {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	for _, p := range []struct{ id, title string }{{"msg_1", "one"}, {"msg_2", "two"}, {"msg_1", "one"}} {
		if code := post(t, rc, p.id, body(p.title), true); code != http.StatusNoContent {
			t.Fatalf("%s: status %d, want 204", p.id, code)
		}
	}
	if code := post(t, rc, "msg_3", body("three"), true); code != http.StatusServiceUnavailable {
		t.Fatalf("msg_3: status %d, want Before's 503", code)
	}
	evs := rc.Wait("2 events and a repeat", time.Second, func(evs []Event, dups int) bool { return len(evs) == 2 && dups == 1 })
	if evs[0].ID != "msg_1" || evs[0].Body.Data.Title != "one" || evs[0].Body.Type != "chat.title_changed" ||
		evs[1].ID != "msg_2" || evs[1].Body.Data.Title != "two" || evs[0].At.IsZero() {
		t.Errorf("events %+v, want msg_1 (one) then msg_2 (two)", evs)
	}
	if n, dups := rc.Count(); n != 2 || dups != 1 {
		t.Errorf("Count() = %d, %d; want 2, 1", n, dups)
	}
	if n := rc.Requests(); n != 3 {
		t.Errorf("Requests() = %d, want 3 (Before's request not among them)", n)
	}
}

// recorder is a testing.TB that records the failures reported to it.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

// A request that does not verify is refused and fails the test, and so
// does one before the secret is known; neither is recorded.
func TestReceiverRefusesUnverified(t *testing.T) {
	rec := &recorder{TB: t}
	rc := New(rec)
	if code := post(t, rc, "msg_0", body("early"), false); code != http.StatusServiceUnavailable {
		t.Errorf("before the secret: status %d, want 503", code)
	}
	rc.SetSecret(secret)
	if code := post(t, rc, "msg_1", body("forged"), false); code != http.StatusBadRequest {
		t.Errorf("a wrong signature: status %d, want 400", code)
	}
	if n, dups := rc.Count(); n != 0 || dups != 0 || rc.Requests() != 0 {
		t.Errorf("recorded %d events, %d repeats, %d requests; want none", n, dups, rc.Requests())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.failed) != 2 {
		t.Errorf("failures reported: %q; want two (no secret, no verification)", rec.failed)
	}
}
