package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// TestToolProgressReachesTheChatStream: progress a tool reports while it runs
// is published on the chat's topic, naming the call and the assistant
// message that made it, before the call's result is written.
func TestToolProgressReachesTheChatStream(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "slow", Args: `{}`}}},
		llmtest.Turn{Text: "done"},
	)
	release, subscribed := make(chan struct{}), make(chan struct{})
	reg := tools.NewRegistry(nil)
	slow := tool.Func(tool.Decl{Name: "slow", Description: "reports progress, then waits"},
		func(ctx context.Context, c tool.Call) (tool.Result, error) {
			if c.Progress == nil {
				return tool.Errorf("no progress reporter"), nil
			}
			<-subscribed // the test listens before the report is made
			c.Progress(tool.Progress{Progress: 1, Total: 2, Message: "half way"})
			select {
			case <-release:
			case <-ctx.Done():
				return tool.Result{}, ctx.Err()
			}
			return tool.Text("ok"), nil
		})
	if err := reg.AddTool(slow); err != nil {
		t.Fatal(err)
	}
	h.start(tools.NewDispatcher(reg, tools.Options{}, nil))
	c := h.create("go slow")
	evs := h.subscribe(c.ID)
	close(subscribed)

	var got *events.ToolProgress
	timeout := time.After(10 * time.Second)
	for got == nil {
		select {
		case ev := <-evs:
			if ev.Kind == events.KindToolProgress {
				got = ev.Progress
			}
			if ev.Kind == events.KindMessage && ev.Message.Role == chat.RoleTool {
				t.Fatal("the result was written before any progress was published")
			}
		case <-timeout:
			t.Fatal("no tool-progress event")
		}
	}
	close(release)
	h.waitStatus(c.ID, chat.Waiting)
	msgs := h.history(c.ID)
	want := events.ToolProgress{Type: "tool-progress", MessageID: msgs[1].ID, ToolCallID: "c1", ToolName: "slow", Progress: 1, Total: 2, Message: "half way"}
	if *got != want {
		t.Fatalf("progress %+v, want %+v", *got, want)
	}
	if b, _ := json.Marshal(msgs[2].Parts[0].Output); string(b) != `"ok"` {
		t.Fatalf("result %s", b)
	}
}

// TestToolProgressIsThrottledAndEndsWithTheCall: a tool that reports 100
// times at once reaches the stream a few times, its completing report
// always; a report it makes after it returned is dropped.
func TestToolProgressIsThrottledAndEndsWithTheCall(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "chatty", Args: `{}`}}},
		llmtest.Turn{Text: "done"},
	)
	subscribed, late := make(chan struct{}), make(chan func(tool.Progress), 1)
	reg := tools.NewRegistry(nil)
	chatty := tool.Func(tool.Decl{Name: "chatty", Description: "reports a lot"},
		func(ctx context.Context, c tool.Call) (tool.Result, error) {
			<-subscribed
			for i := 1; i <= 100; i++ {
				c.Progress(tool.Progress{Progress: float64(i), Total: 100})
			}
			late <- c.Progress
			return tool.Text("ok"), nil
		})
	if err := reg.AddTool(chatty); err != nil {
		t.Fatal(err)
	}
	h.start(tools.NewDispatcher(reg, tools.Options{}, nil))
	c := h.create("go")
	evs := h.subscribe(c.ID)
	close(subscribed)
	h.waitStatus(c.ID, chat.Waiting)
	(<-late)(tool.Progress{Progress: 101, Total: 100, Message: "after the result"})

	// A marker after everything: the topic keeps order, so every event
	// published before it has arrived when it does.
	if err := h.ps.Publish(context.Background(), events.ChatTopic(c.ID), events.Encode(events.ChatEvent{Kind: "test-marker"})); err != nil {
		t.Fatal(err)
	}
	var got []float64
	for done := false; !done; {
		select {
		case ev := <-evs:
			switch ev.Kind {
			case events.KindToolProgress:
				got = append(got, ev.Progress.Progress)
			case "test-marker":
				done = true
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the marker never arrived")
		}
	}
	if len(got) == 0 || len(got) >= 100 || got[len(got)-1] != 100 {
		t.Fatalf("progress on the stream: %v; want a few reports, the last the completing one", got)
	}
}
