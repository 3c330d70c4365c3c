package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestMaxStreamsCountsEveryStream: the AI SDK routes and the
// OpenAI-compatible streamed answers are streams too: at the owner's
// max_streams they are refused with 429 before anything is written, and
// the refusal is counted.
func TestMaxStreamsCountsEveryStream(t *testing.T) {
	// An engine runs: a stream let through ends (its run fails, the fake
	// has no answer), so a missing count fails the test rather than hangs it.
	s := newLive(t, llmtest.NewOpenAIChat(t), func(su *setup) { su.cfg.Quotas.Defaults.MaxStreams = 1 })
	alice := s.token("alice")
	c := s.createChat(alice, map[string]any{"title": "t"})
	s.watchChat(alice, c.ID, streamOpts{}) // the one stream alice may have

	s.do("POST", "/api/v1/ai-sdk/chat", alice, map[string]any{"id": "app-chat", "messages": []any{userMsg("hi")}}).
		expectError(t, http.StatusTooManyRequests, "too_many_streams")
	s.do("GET", "/api/v1/ai-sdk/chat/"+c.ID+"/stream", alice, nil).expectError(t, http.StatusTooManyRequests, "too_many_streams")
	for path, body := range map[string]string{
		"/v1/chat/completions": `{"model":"fake","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"/v1/responses":        `{"model":"fake","stream":true,"input":"hi"}`,
	} {
		res := s.do("POST", path, alice, body)
		if b := string(res.body); res.status != http.StatusTooManyRequests || !strings.Contains(b, `"insufficient_quota"`) || !strings.Contains(b, "max_streams") {
			t.Errorf("POST %s: %d %s, want 429 insufficient_quota for max_streams", path, res.status, res.body)
		}
	}
	if list := s.listChats(alice, ""); len(list.Chats) != 1 {
		t.Fatalf("alice has %d chats after the refusals, want 1", len(list.Chats))
	}
	if got := s.metric("parley_quota_refusals_total", `owner="alice",reason="max_streams"`); got != 4 {
		t.Fatalf("max_streams refusals of alice: %v, want 4", got)
	}
}
