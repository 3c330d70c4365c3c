package api_test

import (
	"bufio"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestAISDKFirstChunkLatency (with PARLEY_BENCH=1; it is a measurement,
// not a check of behaviour) measures, for the same run, the time from the
// POST /api/v1/ai-sdk/chat to its first text-delta chunk, and to the first
// text-delta part event on GET /api/v1/chats/{id}/stream, open beside it.
// It logs the medians and the median of the difference (ai-sdk minus
// stream) per run, and fails if that is above 1 ms.
func TestAISDKFirstChunkLatency(t *testing.T) {
	if os.Getenv("PARLEY_BENCH") == "" {
		t.Skip("a measurement: set PARLEY_BENCH=1 to run it")
	}
	const runs = 300
	fake := llmtest.NewOpenAIChat(t)
	s := newLive(t, fake)
	tok := s.token("alice")
	fake.Push(llmtest.Turn{Text: "warm up"})
	first := openUI(t, s, "POST", "/api/v1/ai-sdk/chat", tok, map[string]any{"id": "bench", "parley": map[string]any{"title": "t"},
		"messages": []any{userMsg("hi")}})
	first.rest(first.next())
	id := s.listChats(tok, "?label=ai-sdk-chat:bench").Chats[0].ID

	req, _ := http.NewRequest("GET", s.url+"/api/v1/chats/"+id+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	firstDelta := func() time.Time {
		part := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "event: part":
				part = true
			case part && strings.HasPrefix(line, "data: ") && strings.Contains(line, `"text-delta"`):
				return time.Now()
			case line == "":
				part = false
			}
		}
		t.Error("chat stream ended") // on the reader's goroutine: no Fatal
		return time.Time{}
	}

	var ai, st, diff []time.Duration
	for range runs {
		fake.Push(llmtest.Turn{Text: "Hello there, a benchmark answer.", ChunkSize: 8})
		got := make(chan time.Time, 1)
		go func() { got <- firstDelta() }()
		t0 := time.Now()
		u := openUI(t, s, "POST", "/api/v1/ai-sdk/chat", tok, map[string]any{"id": "bench", "messages": []any{userMsg("again")}})
		var t1 time.Time
		for c := u.next(); c != nil; c = u.next() {
			if c["type"] == "text-delta" && t1.IsZero() {
				t1 = time.Now()
			}
		}
		t2 := <-got
		ai, st, diff = append(ai, t1.Sub(t0)), append(st, t2.Sub(t0)), append(diff, t1.Sub(t2))
		// Drain the chat stream to the end of this run.
		for sc.Scan() && !strings.Contains(sc.Text(), `"status":"waiting"`) {
		}
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	mAI, mSt, mDiff := med(ai), med(st), med(diff)
	t.Logf("%d runs: first text chunk through /ai-sdk/chat %.0f µs, first delta on /chats/{id}/stream %.0f µs (medians); median difference %.0f µs",
		runs, mAI, mSt, mDiff)
	if mDiff > 1000 {
		t.Errorf("the AI SDK stream is %.0f µs behind at the median, want at most 1 ms", mDiff)
	}
}
