package api_test

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// uiStream reads a UI message stream chunk by chunk.
type uiStream struct {
	t   *testing.T
	res *http.Response
	sc  *bufio.Scanner
}

func openUI(t *testing.T, s *server, method, path, tok string, body any) *uiStream {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req) // returns once the server subscribed and answered
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d", method, path, res.StatusCode)
	}
	return &uiStream{t: t, res: res, sc: bufio.NewScanner(res.Body)}
}

// next returns the next chunk, nil at [DONE].
func (u *uiStream) next() map[string]any {
	u.t.Helper()
	for u.sc.Scan() {
		line, ok := strings.CutPrefix(u.sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			return nil
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			u.t.Fatal(err)
		}
		return c
	}
	u.t.Fatalf("stream ended without [DONE]: %v", u.sc.Err())
	return nil
}

// rest reads to [DONE] and returns the chunk types and the text.
func (u *uiStream) rest(c map[string]any) (types []string, text string) {
	for ; c != nil; c = u.next() {
		types = append(types, c["type"].(string))
		if c["type"] == "text-delta" {
			text += c["delta"].(string)
		}
	}
	return types, text
}

// TestAISDKResumeOnAnotherReplica: a run on replica A, held by the model
// mid-answer, is resumed from replica B, which streams it from its start:
// the deltas A streamed before B joined and those after.
func TestAISDKResumeOnAnotherReplica(t *testing.T) {
	dsn := pgtest.Migrated(t)
	channel := "parley_test_" + strings.ToLower(rand.Text()[:10])
	fake := llmtest.NewOpenAIChat(t)
	live := func(su *setup) { su.cfg = liveConfig(fake.URL) }
	a := newPostgres(t, dsn, channel, live)
	b := newPostgres(t, dsn, channel, live)
	runEngine(t, a)
	tok := a.token("alice")

	gate := make(chan struct{})
	const answer = "A slow answer across replicas."
	fake.Push(llmtest.Turn{Text: answer, ChunkSize: 3, Gate: gate, GateAfter: 3})
	onA := openUI(t, a, "POST", "/api/v1/ai-sdk/chat", tok, map[string]any{"id": "c-rep", "parley": map[string]any{"title": "t"},
		"messages": []any{userMsg("hi")}})
	var first []map[string]any
	for c := onA.next(); ; c = onA.next() {
		first = append(first, c)
		if c["type"] == "text-delta" {
			break
		}
	}
	onB := openUI(t, b, "GET", "/api/v1/ai-sdk/chat/c-rep/stream", tok, nil)
	close(gate)

	typesA, restA := onA.rest(onA.next())
	typesB, textB := onB.rest(onB.next())
	textA := first[len(first)-1]["delta"].(string) + restA
	if textA != answer || textB != answer {
		t.Fatalf("A streamed %q, B %q; want %q", textA, textB, answer)
	}
	wantEnd := "text-end,finish-step,finish"
	if j := strings.Join(typesB, ","); !strings.HasPrefix(j, "start,start-step,text-start,text-delta") || !strings.HasSuffix(j, wantEnd) {
		t.Fatalf("B's chunks %s", j)
	}
	if j := strings.Join(typesA, ","); !strings.HasSuffix(j, wantEnd) {
		t.Fatalf("A's chunks %s", j)
	}
}
