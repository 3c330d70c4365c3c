package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/service"
)

// titler answers title requests (recognised by their system prompt) with a
// fixed title after a delay, and everything else at once.
type titler struct{ delay time.Duration }

func (p titler) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	text := "the answer"
	if strings.Contains(req.System, "title") {
		select {
		case <-time.After(p.delay):
		case <-ctx.Done():
			return llm.Result{}, ctx.Err()
		}
		text = "\"Weather in Paris.\"\nextra line"
	}
	if err := emit(llm.Event{Type: llm.TextDelta, Text: text}); err != nil {
		return llm.Result{}, err
	}
	return llm.Result{Parts: []chat.Part{chat.TextPart(text)}, FinishReason: "stop"}, nil
}

func TestTitleIsGeneratedWithoutDelayingTheAnswer(t *testing.T) {
	h := newHarness(t)
	e := engine.New(h.cfg, h.st, h.ps, models{"fake": {Name: "fake", Provider: titler{delay: 300 * time.Millisecond}}}, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	defer func() { cancel(); <-done }()

	feed, err := h.ps.Subscribe(ctx, events.FeedTopic(owner))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal("what is the weather like in Paris today?")
	c, err := h.svc.CreateChat(ctx, owner, service.NewChat{Message: raw})
	if err != nil {
		t.Fatal(err)
	}
	fallback := c.Title
	// The answer comes first: the title call takes 300 ms.
	c = h.waitStatus(c.ID, chat.Waiting)
	if c.Title != fallback {
		t.Fatalf("title changed before the answer: %q", c.Title)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-feed.C():
			var ev events.FeedEvent
			if json.Unmarshal(m.Payload, &ev) == nil && ev.Kind == events.KindTitleChange {
				if ev.Chat.Title != "Weather in Paris" {
					t.Fatalf("title %q", ev.Chat.Title)
				}
				got, _ := h.st.GetChat(ctx, c.ID)
				if got.Title != "Weather in Paris" {
					t.Fatalf("stored title %q", got.Title)
				}
				return
			}
		case <-deadline:
			t.Fatal("no title_change event")
		}
	}
}

func TestTitleKeepsAClientTitle(t *testing.T) {
	h := newHarness(t)
	e := engine.New(h.cfg, h.st, h.ps, models{"fake": {Name: "fake", Provider: titler{}}}, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	raw, _ := json.Marshal("hello")
	c, err := h.svc.CreateChat(ctx, owner, service.NewChat{Message: raw, Title: "Mine"})
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(c.ID, chat.Waiting)
	cancel()
	<-done // the engine waits for its title goroutines
	got, _ := h.st.GetChat(context.Background(), c.ID)
	if got.Title != "Mine" {
		t.Fatalf("title %q", got.Title)
	}
}

// panickyTitler panics on title requests and answers everything else.
type panickyTitler struct{ asked chan struct{} }

func (p panickyTitler) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	if strings.Contains(req.System, "title") {
		close(p.asked)
		panic("the provider's SDK panicked")
	}
	return llm.Result{Parts: []chat.Part{chat.TextPart("the answer")}, FinishReason: "stop"}, nil
}

// TestTitlePanicKeepsTheProcess: a panic while the title is generated is
// logged and the fallback title stays; the process, and the chat, live on.
func TestTitlePanicKeepsTheProcess(t *testing.T) {
	h := newHarness(t)
	asked := make(chan struct{})
	h.startOn(h.st, h.ps, models{"fake": {Name: "fake", Provider: panickyTitler{asked: asked}}}, nil)
	raw, _ := json.Marshal("a question that gets a title")
	c, err := h.svc.CreateChat(context.Background(), owner, service.NewChat{Message: raw})
	if err != nil {
		t.Fatal(err)
	}
	await(t, asked, "the title request")
	h.waitLog("title not generated", "panic")
	if got := h.waitStatus(c.ID, chat.Waiting); got.Title != c.Title {
		t.Fatalf("title %q, want the fallback %q", got.Title, c.Title)
	}
}
