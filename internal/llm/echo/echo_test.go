package echo

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
)

func user(text string) chat.Message {
	return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart(text)}}
}

// run streams one answer and rebuilds its parts from the events, so every
// test also checks that the deltas add up to the result.
func run(t *testing.T, msgs ...chat.Message) (llm.Result, []llm.Event) {
	t.Helper()
	var events []llm.Event
	res, err := New().Stream(context.Background(), llm.Request{Messages: msgs}, func(e llm.Event) error {
		events = append(events, e)
		return nil
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var text strings.Builder
	args := map[int]*strings.Builder{}
	var rebuilt []chat.Part
	for _, e := range events {
		switch e.Type {
		case llm.TextDelta:
			text.WriteString(e.Text)
		case llm.ToolCallStart:
			args[e.Index] = &strings.Builder{}
			rebuilt = append(rebuilt, chat.Part{Type: chat.PartToolCall, ToolCallID: e.ToolCallID, ToolName: e.ToolName})
		case llm.ToolCallDelta:
			args[e.Index].WriteString(e.Text)
		case llm.ToolCallEnd:
			rebuilt[e.Index].Args = json.RawMessage(args[e.Index].String())
		}
	}
	if text.Len() > 0 {
		rebuilt = append([]chat.Part{chat.TextPart(text.String())}, rebuilt...)
	}
	if !reflect.DeepEqual(rebuilt, res.Parts) {
		t.Fatalf("events rebuild %+v, result has %+v", rebuilt, res.Parts)
	}
	return res, events
}

func TestEchoesTheLastUserMessage(t *testing.T) {
	res, events := run(t, user("first"), chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("echo: first")}}, user("hello there, echo"))
	if got := res.Parts[0].Text; got != "echo: hello there, echo" {
		t.Fatalf("text = %q", got)
	}
	if len(events) < 3 {
		t.Errorf("want the answer streamed in several deltas, got %d", len(events))
	}
	if res.FinishReason != "stop" {
		t.Errorf("finish = %q", res.FinishReason)
	}
	// Input: "first" + "echo: first" + "hello there, echo" = 5+11+17 = 33 chars → 9 tokens;
	// output: 23 chars → 6 tokens.
	if res.Usage != (llm.Usage{InputTokens: 9, OutputTokens: 6}) {
		t.Errorf("usage = %+v", res.Usage)
	}
}

func TestIsDeterministic(t *testing.T) {
	a, ea := run(t, user("/call get_weather {\"city\": \"Paris\"}"))
	b, eb := run(t, user("/call get_weather {\"city\": \"Paris\"}"))
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(ea, eb) {
		t.Fatal("two runs on the same history differ")
	}
}

func TestCallsTools(t *testing.T) {
	prior := chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCallID: "call_1", ToolName: "x", Args: json.RawMessage(`{}`)}}}
	result := chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolCallID: "call_1", ToolName: "x", Output: json.RawMessage(`1`)}}}
	res, events := run(t, user("/call x"), prior, result,
		user("please:\n/call get_weather {\"city\": \"Paris\"}\n  /call now\nthanks"))
	want := []chat.Part{
		{Type: chat.PartToolCall, ToolCallID: "call_2", ToolName: "get_weather", Args: json.RawMessage(`{"city": "Paris"}`)},
		{Type: chat.PartToolCall, ToolCallID: "call_3", ToolName: "now", Args: json.RawMessage(`{}`)},
	}
	if !reflect.DeepEqual(res.Parts, want) {
		t.Fatalf("parts = %+v\nwant %+v", res.Parts, want)
	}
	if res.FinishReason != "tool_calls" {
		t.Errorf("finish = %q", res.FinishReason)
	}
	if events[0].Type != llm.ToolCallStart || events[0].Index != 0 || events[len(events)-1] != (llm.Event{Type: llm.ToolCallEnd, Index: 1}) {
		t.Errorf("events = %+v", events)
	}
	deltas := 0
	for _, e := range events {
		if e.Type == llm.ToolCallDelta && e.Index == 0 {
			deltas++
		}
	}
	if deltas < 2 {
		t.Errorf("arguments should stream in pieces, got %d deltas", deltas)
	}
}

func TestRejectsInvalidCallArguments(t *testing.T) {
	res, _ := run(t, user("/call get_weather {city: Paris}"))
	if len(res.Parts) != 1 || res.Parts[0].Type != chat.PartText || !strings.Contains(res.Parts[0].Text, "not valid JSON") {
		t.Fatalf("parts = %+v", res.Parts)
	}
	res, _ = run(t, user("/callme maybe"))
	if res.Parts[0].Text != "echo: /callme maybe" {
		t.Fatalf("a word starting with /call is not a command: %+v", res.Parts)
	}
}

func TestSummarisesToolResults(t *testing.T) {
	results := chat.Message{Role: chat.RoleTool, Parts: []chat.Part{
		{Type: chat.PartToolResult, ToolCallID: "call_1", ToolName: "get_weather", Output: json.RawMessage(`{"temp": 21, "sky": "clear"}`)},
		{Type: chat.PartToolResult, ToolCallID: "call_2", ToolName: "now", Output: json.RawMessage(`"unknown tool"`), IsError: true},
	}}
	res, _ := run(t, user("/call get_weather {}\n/call now"), results)
	want := "tool get_weather returned {\"temp\":21,\"sky\":\"clear\"}\ntool now failed: unknown tool"
	if res.Parts[0].Text != want {
		t.Fatalf("text = %q\nwant %q", res.Parts[0].Text, want)
	}
}

func TestNothingToEcho(t *testing.T) {
	res, _ := run(t)
	if res.Parts[0].Text != "echo: (nothing to echo)" {
		t.Fatalf("parts = %+v", res.Parts)
	}
}

func TestStopsOnEmitErrorAndCancellation(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	_, err := New().Stream(context.Background(), llm.Request{Messages: []chat.Message{user("a b c d")}}, func(llm.Event) error {
		n++
		return boom
	})
	if !errors.Is(err, boom) || n != 1 {
		t.Fatalf("err = %v after %d events, want boom after 1", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New().Stream(ctx, llm.Request{Messages: []chat.Message{user("a")}}, func(llm.Event) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
