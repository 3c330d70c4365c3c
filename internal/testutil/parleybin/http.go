package parleybin

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/store/sqlite"
	"github.com/parleyhq/parley/internal/testutil/invariant"
)

// Do sends a request to a started parley with an optional JSON body and
// the bearer token (none if "") and returns the status and body; timeout
// bounds it.
func Do(t testing.TB, method, url, token, body string, timeout time.Duration) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: timeout}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp.StatusCode, string(b)
}

// CheckHistories runs the history invariant over a SQLite database a
// parley process left behind (none if it never created one).
func CheckHistories(t testing.TB, path string) {
	if _, err := os.Stat(path); err != nil {
		return
	}
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Errorf("open %s for the history check: %v", path, err)
		return
	}
	defer st.Close()
	invariant.Check(t, st)
}
