package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// testReadTimeout stands for requestReadTimeout in these tests.
const testReadTimeout = 300 * time.Millisecond

// startTestServer serves handler as runHTTP does, with testReadTimeout, on
// a loopback port, and returns the address.
func startTestServer(t *testing.T, handler http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(context.Background(), handler, slog.New(slog.DiscardHandler), testReadTimeout)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestHTTPUnfinishedBodyTimesOut: a request whose headers promise 100000
// bytes of body and whose client sends one and then nothing gets its answer
// and a closed connection soon after the read timeout, whether the handler
// reads the body or answers without reading it (as a request without a
// valid token is answered).
func TestHTTPUnfinishedBodyTimesOut(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		status  string
	}{
		{"handler reads the body", func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}, "400"},
		{"handler does not read it", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no token", http.StatusUnauthorized)
		}, "401"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := startTestServer(t, tc.handler)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := fmt.Fprint(conn, "POST /v1/chats HTTP/1.1\r\nHost: parley\r\nContent-Type: application/json\r\n"+
				"Content-Length: 100000\r\n\r\n{"); err != nil {
				t.Fatal(err)
			}
			// Generous: the server should close at about testReadTimeout.
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(conn)
			if err != nil {
				t.Fatalf("the connection was still open after 10s (read: %v); got %q", err, got)
			}
			if want := "HTTP/1.1 " + tc.status + " "; !strings.HasPrefix(string(got), want) {
				t.Fatalf("answer %q, want %q...", got, want)
			}
		})
	}
}

// TestHTTPStreamOutlivesReadTimeout: a streamed response (an event stream)
// stays open, and its request context alive, well past the read timeout,
// for a GET without a body and for a POST whose body the handler read.
func TestHTTPStreamOutlivesReadTimeout(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			gate := make(chan struct{}, 1)
			ended := make(chan error, 1)
			addr := startTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, err := io.ReadAll(r.Body); err != nil {
					ended <- fmt.Errorf("read body: %w", err)
					return
				}
				rc := http.NewResponseController(w)
				w.Header().Set("Content-Type", "text/event-stream")
				for i := 1; ; i++ {
					fmt.Fprintf(w, "data: %d\n\n", i)
					if err := rc.Flush(); err != nil {
						ended <- err
						return
					}
					select {
					case <-gate:
					case <-r.Context().Done():
						ended <- context.Cause(r.Context())
						return
					}
				}
			}))

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var body io.Reader
			if method == http.MethodPost {
				body = strings.NewReader(`{"content":"hello"}`)
			}
			req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+"/v1/chats/c1/events", body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			events := bufio.NewReader(resp.Body)
			next := func(want string) {
				t.Helper()
				for {
					line, err := events.ReadString('\n')
					if err != nil {
						t.Fatalf("stream ended before %q: %v", want, err)
					}
					if line = strings.TrimSpace(line); line != "" {
						if line != want {
							t.Fatalf("event %q, want %q", line, want)
						}
						return
					}
				}
			}
			next("data: 1")

			// Let the read timeout pass several times over; a stream cut by it
			// shows as its handler's end.
			past := time.NewTimer(5 * testReadTimeout)
			defer past.Stop()
			select {
			case err := <-ended:
				t.Fatalf("the stream's handler ended before the read timeout had passed five times: %v", err)
			case <-past.C:
			}
			gate <- struct{}{}
			next("data: 2")
			select {
			case err := <-ended:
				t.Fatalf("the stream's handler ended: %v", err)
			default:
			}
		})
	}
}
