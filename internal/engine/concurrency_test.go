package engine_test

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/store"
)

// TestConcurrencyAboveOneAcquire: a worker with more slots than one
// AcquireChats call may take acquires in several calls, and runs its
// chats (it used to ask for every slot at once, which the store refused on
// every round, so no chat ever ran).
func TestConcurrencyAboveOneAcquire(t *testing.T) {
	h := newHarness(t, func(c *engine.Config) { c.Concurrency = store.MaxAcquire + 500 })
	h.fake.Push(llmtest.Turn{Text: "one"}, llmtest.Turn{Text: "two"})
	h.start(nil)
	a, b := h.create("first"), h.create("second")
	h.waitStatus(a.ID, chat.Waiting)
	h.waitStatus(b.ID, chat.Waiting)
	h.logs.mu.Lock()
	defer h.logs.mu.Unlock()
	for _, r := range h.logs.recs {
		if strings.HasPrefix(r, "acquire chats") {
			t.Fatalf("an acquisition failed: %s", r)
		}
	}
}
