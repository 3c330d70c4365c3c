package facade_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/facade"
	"github.com/parleyhq/parley/internal/quota"
)

// testClock is a clock that moves only when told.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestRateLimitedAnswersOpenAIShape: a token over its rate gets OpenAI's
// 429 rate_limit_exceeded with Retry-After, which the official SDK
// surfaces; the token's bucket refills on the server's clock.
func TestRateLimitedAnswersOpenAIShape(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)}
	r, _ := newSQLite(t, func(d *api.Deps) {
		d.Now = clock.Now
		d.Config.Quotas.Defaults.RequestsPerSecond = 0.5
		d.Config.Quotas.Defaults.Burst = 1
	})
	ctx := context.Background()
	c := r.client(r.token("alice"))
	if _, err := c.Models.List(ctx); err != nil {
		t.Fatalf("the first request: %v", err)
	}
	var res *http.Response
	_, err := c.Models.List(ctx, option.WithResponseInto(&res))
	expectError(t, err, http.StatusTooManyRequests, "requests", "", "rate_limit_exceeded")
	if got := res.Header.Get("Retry-After"); got != "2" {
		t.Fatalf("Retry-After %q, want 2", got)
	}
	// Chat completions count too.
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	expectError(t, err, http.StatusTooManyRequests, "requests", "", "rate_limit_exceeded")
	clock.Advance(2 * time.Second)
	if _, err := c.Models.List(ctx); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
}

// TestBudgetAnswersInsufficientQuota: a reached spend or token budget (or
// another of the owner's caps), before a run or during it, is OpenAI's 429
// insufficient_quota, which the official SDK surfaces without
// retrying it (a budget does not come back within its retries).
func TestBudgetAnswersInsufficientQuota(t *testing.T) {
	for _, err := range []error{
		&quota.ExceededError{Owner: "alice", Unit: "micros", Limit: 100, Spent: 120, Period: quota.Day,
			ResetsAt: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)},
		&quota.CapError{Owner: "alice", Key: "max_chats", Limit: 3},
		// A run the budget stopped after a step.
		facade.RunFailed(chat.Chat{ID: "c1", Status: chat.Error, LastError: &chat.ChatError{Kind: "spend_limit", Message: "the day spend limit is reached"}}),
	} {
		var requests atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			facade.WriteError(w, err)
		}))
		t.Cleanup(srv.Close)
		c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(2))
		_, got := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "fake",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		expectError(t, got, http.StatusTooManyRequests, "insufficient_quota", "", "insufficient_quota")
		if n := requests.Load(); n != 1 {
			t.Fatalf("%T: the SDK sent %d requests, want 1 (no retries)", err, n)
		}
	}
}
