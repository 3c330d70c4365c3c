package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/service"
)

// titler answers title requests (recognised by their system prompt) with a
// fixed title once release is closed (at once when it is nil), and
// everything else at once.
type titler struct{ release chan struct{} }

func (p titler) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	text := "the answer"
	if strings.Contains(req.System, "title") {
		if p.release != nil {
			select {
			case <-p.release:
			case <-ctx.Done():
				return llm.Result{}, ctx.Err()
			}
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
	release := make(chan struct{})
	e := engine.New(h.cfg, h.st, h.ps, models{"fake": {Name: "fake", Provider: titler{release: release}}}, nil, nil)
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
	// The answer comes while the title call is held.
	c = h.waitStatus(c.ID, chat.Waiting)
	if c.Title != fallback {
		t.Fatalf("title changed before the answer: %q", c.Title)
	}
	close(release)
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

// countingTitler counts title requests and reports each on titled; a title
// request returns "Counted title" with usage of 7 + 3 tokens once release
// is closed, and a title request never released ends with its context.
// Answer requests wait for their context when hold is set (a run stopped
// mid-step), and are answered at once with usage of 1 + 1 otherwise.
type countingTitler struct {
	titles  *atomic.Int64
	titled  chan struct{}
	release chan struct{}
	hold    bool
}

func (p countingTitler) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	if strings.Contains(req.System, "title") {
		p.titles.Add(1)
		p.titled <- struct{}{}
		select {
		case <-p.release:
		case <-ctx.Done():
			return llm.Result{}, ctx.Err()
		}
		return llm.Result{Parts: []chat.Part{chat.TextPart("Counted title")}, Usage: llm.Usage{InputTokens: 7, OutputTokens: 3}, FinishReason: "stop"}, nil
	}
	if p.hold {
		<-ctx.Done()
		return llm.Result{}, ctx.Err()
	}
	return llm.Result{Parts: []chat.Part{chat.TextPart("the answer")}, Usage: llm.Usage{InputTokens: 1, OutputTokens: 1}, FinishReason: "stop"}, nil
}

// TestTitleCallIsCounted: the title call's usage is the chat's and its
// owner's, as a step's is.
func TestTitleCallIsCounted(t *testing.T) {
	h := newHarness(t)
	p := countingTitler{titles: &atomic.Int64{}, titled: make(chan struct{}, 4), release: make(chan struct{})}
	close(p.release)
	h.startOn(h.st, h.ps, models{"fake": {Name: "fake", Provider: p}}, nil)
	ctx := context.Background()
	feed, err := h.ps.Subscribe(ctx, events.FeedTopic(owner))
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Close()
	c, err := h.svc.CreateChat(ctx, owner, service.NewChat{Message: json.RawMessage(`"count the title too"`)})
	if err != nil {
		t.Fatal(err)
	}
	await(t, p.titled, "the title request")
	h.waitStatus(c.ID, chat.Waiting)
	for titled := false; !titled; {
		select {
		case m := <-feed.C():
			var ev events.FeedEvent
			titled = json.Unmarshal(m.Payload, &ev) == nil && ev.Kind == events.KindTitleChange
		case <-time.After(10 * time.Second):
			t.Fatal("no title_change event")
		}
	}
	got, err := h.st.GetChat(ctx, c.ID)
	if err != nil || got.Title != "Counted title" {
		t.Fatalf("title %q (%v), want the generated one", got.Title, err)
	}
	if want := (chat.Usage{InputTokens: 8, OutputTokens: 4}); got.Usage != want {
		t.Errorf("chat usage %+v, want the answer's and the title call's %+v", got.Usage, want)
	}
	u, err := h.st.OwnerUsage(ctx, owner, quota.Day.Start(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if u.InputTokens+u.OutputTokens != 12 {
		t.Errorf("owner usage %+v, want 12 tokens with the title call's", u)
	}
}

// TestTitleCallOncePerChatAndShutdownNotHeld: the engine shuts down while
// the chat's first step and its title call are both in flight: shutdown
// does not wait for the title call (it is cancelled), and the run that
// takes the handed-back chat answers it without a second title call.
func TestTitleCallOncePerChatAndShutdownNotHeld(t *testing.T) {
	h := newHarness(t)
	p := countingTitler{titles: &atomic.Int64{}, titled: make(chan struct{}, 4), hold: true}
	stop := h.startOn(h.st, h.ps, models{"fake": {Name: "fake", Provider: p}}, nil)
	c, err := h.svc.CreateChat(context.Background(), owner, service.NewChat{Message: json.RawMessage(`"a first question"`)})
	if err != nil {
		t.Fatal(err)
	}
	await(t, p.titled, "the title request")
	stopped := make(chan struct{})
	go func() { defer close(stopped); stop() }()
	await(t, stopped, "the engine's shutdown, with the title call in flight") // not its 30 s timeout
	h.waitStatus(c.ID, chat.Pending)

	p.hold = false // the next engine's answers come at once
	h.startOn(h.st, h.ps, models{"fake": {Name: "fake", Provider: p}}, nil)
	got := h.waitStatus(c.ID, chat.Waiting)
	h.stopAll() // the title goroutines, if any, are done
	if n := p.titles.Load(); n != 1 {
		t.Fatalf("%d title calls for one chat, want 1", n)
	}
	if got.Title != c.Title {
		t.Fatalf("title %q, want the fallback %q", got.Title, c.Title)
	}
}
