package llmtest

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// gateFake is one fake server and how to ask it for a stream.
type gateFake struct {
	name   string
	script *Script
	post   func(ctx context.Context) (*http.Response, error)
}

// gateFakes starts one of each fake.
func gateFakes(t *testing.T) []gateFake {
	post := func(url, body string, header map[string]string) func(ctx context.Context) (*http.Response, error) {
		return func(ctx context.Context) (*http.Response, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				return nil, err
			}
			for k, v := range header {
				req.Header.Set(k, v)
			}
			return http.DefaultClient.Do(req)
		}
	}
	bearer := map[string]string{"Authorization": "Bearer k", "Content-Type": "application/json"}
	chat, responses, anthropic := NewOpenAIChat(t), NewOpenAIResponses(t), NewAnthropic(t)
	return []gateFake{
		{"chat", chat.Script, post(chat.URL+"/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, bearer)},
		{"responses", responses.Script, post(responses.URL+"/responses", `{"model":"m","stream":true,"input":"hi"}`, bearer)},
		{"anthropic", anthropic.Script, post(anthropic.URL+"/v1/messages", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01", "Content-Type": "application/json"})},
	}
}

// sseEvents sends the data of each event of body on the returned channel,
// closed when the body ends.
func sseEvents(body *http.Response) <-chan string {
	out := make(chan string, 100)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- data
			}
		}
	}()
	return out
}

// recv returns the next value of c, failing the test if none comes before
// a generous deadline (a broken fake fails instead of hanging).
func recv[T any](t *testing.T, c <-chan T, what string) (T, bool) {
	t.Helper()
	select {
	case v, ok := <-c:
		return v, ok
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		var zero T
		return zero, false
	}
}

// TestGateHoldsTheTurnUntilReleased: every fake closes Started as it serves
// the turn, sends GateAfter events, and sends the rest, the whole turn, only
// once the test closes the gate.
func TestGateHoldsTheTurnUntilReleased(t *testing.T) {
	for _, f := range gateFakes(t) {
		t.Run(f.name, func(t *testing.T) {
			f.script.Push(Turn{Text: "Hello world"}) // the stream without a gate, to compare
			res, err := f.post(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var whole []string
			for ev := range sseEvents(res) {
				whole = append(whole, ev)
			}
			res.Body.Close()

			started, gate := make(chan struct{}), make(chan struct{})
			f.script.Push(Turn{Text: "Hello world", Started: started, Gate: gate, GateAfter: 2})
			res, err = f.post(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			recv(t, started, "Started")
			evs := sseEvents(res)
			var got []string
			for range 2 {
				ev, ok := recv(t, evs, "event before the gate")
				if !ok {
					t.Fatal("the stream ended before the gate")
				}
				got = append(got, ev)
			}
			close(gate)
			for {
				ev, ok := recv(t, evs, "event after the gate")
				if !ok {
					break
				}
				got = append(got, ev)
			}
			if len(got) != len(whole) {
				t.Fatalf("gated stream: %d events, want the %d of the whole turn", len(got), len(whole))
			}
		})
	}
}

// TestGoneSaysTheClientCancelled: a client that goes away while the turn
// is held at its gate makes the fake close Gone; the gate is never opened.
func TestGoneSaysTheClientCancelled(t *testing.T) {
	for _, f := range gateFakes(t) {
		t.Run(f.name, func(t *testing.T) {
			started, gone := make(chan struct{}), make(chan struct{})
			f.script.Push(Turn{Text: "never sent", Started: started, Gate: make(chan struct{}), Gone: gone})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				res, err := f.post(ctx)
				if err == nil {
					for range sseEvents(res) {
					}
					res.Body.Close()
				}
				done <- err
			}()
			recv(t, started, "Started")
			cancel()
			recv(t, gone, "Gone")
			recv(t, done, "end of the request")
		})
	}
}

// TestGateHoldsAnErrorAnswer: an error turn without CutAfter answers its
// status only once the gate is closed.
func TestGateHoldsAnErrorAnswer(t *testing.T) {
	for _, f := range gateFakes(t) {
		t.Run(f.name, func(t *testing.T) {
			started, gate := make(chan struct{}), make(chan struct{})
			f.script.Push(Turn{Status: http.StatusServiceUnavailable, Started: started, Gate: gate})
			type answer struct {
				status int
				err    error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := f.post(context.Background())
				if err != nil {
					done <- answer{err: err}
					return
				}
				res.Body.Close()
				done <- answer{status: res.StatusCode}
			}()
			recv(t, started, "Started")
			select {
			case a := <-done:
				t.Fatalf("answered %+v before the gate was closed", a)
			default:
			}
			close(gate)
			a, _ := recv(t, done, "answer")
			if a.err != nil || a.status != http.StatusServiceUnavailable {
				t.Fatalf("answer %+v, want 503", a)
			}
		})
	}
}
