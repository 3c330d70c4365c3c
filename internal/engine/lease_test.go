package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/store"
)

// TestWorkerThatLostItsLeaseWritesNothing: worker A stops renewing (its
// heartbeat never fires), its lease expires, worker B recovers the chat and
// answers it; when A's model call, held on a gate until then, returns, A's
// fenced write fails and its answer is nowhere in the history.
func TestWorkerThatLostItsLeaseWritesNothing(t *testing.T) {
	h := newHarness(t)
	startedA, gateA := make(chan struct{}), make(chan struct{})
	h.fake.Push(
		llmtest.Turn{Text: "stale answer from A", Started: startedA, Gate: gateA},
		llmtest.Turn{Text: "fresh answer from B"},
	)
	a := h.cfg
	a.WorkerID, a.Concurrency, a.LeaseTTL, a.Heartbeat = "worker-a", 1, 200*time.Millisecond, time.Hour
	stopA := startWith(h, a)
	defer stopA()
	c := h.create("hi")
	running := h.waitStatus(c.ID, chat.Running)
	if running.WorkerID != "worker-a" {
		t.Fatalf("acquired by %q", running.WorkerID)
	}
	await(t, startedA, "worker A's model call")

	b := h.cfg
	b.WorkerID = "worker-b"
	startWith(h, b)
	h.waitRequests(2)
	h.waitStatus(c.ID, chat.Waiting)

	// Only now A's call returns, and its fenced write is refused.
	close(gateA)
	h.waitLog("lease lost", "worker-a")
	for _, m := range h.history(c.ID) {
		for _, p := range m.Parts {
			if strings.Contains(p.Text, "from A") {
				t.Fatalf("worker A wrote after losing its lease: %+v", m)
			}
		}
	}
	final, err := h.st.GetChat(context.Background(), c.ID)
	if err != nil || final.Status != chat.Waiting || final.LeaseGeneration < 2 {
		t.Fatalf("chat after: %+v %v", final, err)
	}
	if got := len(h.history(c.ID)); got != 2 {
		t.Fatalf("%d messages, want 2", got)
	}
	var lost store.Lease = store.Lease{ChatID: c.ID, WorkerID: "worker-a", Generation: running.LeaseGeneration}
	if _, err := h.st.RenewLease(context.Background(), lost, time.Second); err == nil {
		t.Fatal("A's old lease still renews")
	}
}

func startWith(h *harness, cfg engine.Config) func() {
	old := h.cfg
	h.cfg = cfg
	stop := h.start(nil)
	h.cfg = old
	return stop
}
