package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/anthropic"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// setup starts a fake API and a provider pointed at it.
func setup(t *testing.T) (*anthropic.Provider, *llmtest.Anthropic) {
	t.Helper()
	f := llmtest.NewAnthropic(t)
	p := anthropic.New(anthropic.Config{Model: "claude-test", BaseURL: f.URL, APIKey: "sk-ant-test"})
	return p, f
}

// hello is a one-message request.
func hello() llm.Request {
	return llm.Request{Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("hello")}}}}
}

// run streams req and records every event.
func run(t *testing.T, p *anthropic.Provider, req llm.Request) ([]llm.Event, llm.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var evs []llm.Event
	res, err := p.Stream(ctx, req, func(e llm.Event) error {
		evs = append(evs, e)
		return nil
	})
	return evs, res, err
}

// apiError asserts err is an *llm.Error and returns it.
func apiError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *llm.Error", err, err)
	}
	if e.Provider != "anthropic" {
		t.Errorf("Provider = %q, want anthropic", e.Provider)
	}
	return e
}

func TestStreamText(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Text: "Hello, world!", ChunkSize: 4, Usage: llmtest.Usage{InputTokens: 12, OutputTokens: 34}})

	evs, res, err := run(t, p, hello())
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Event{
		{Type: llm.TextDelta, Text: "Hell"}, {Type: llm.TextDelta, Text: "o, w"},
		{Type: llm.TextDelta, Text: "orld"}, {Type: llm.TextDelta, Text: "!"},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Errorf("events = %+v, want %+v", evs, want)
	}
	if want := []chat.Part{chat.TextPart("Hello, world!")}; !reflect.DeepEqual(res.Parts, want) {
		t.Errorf("parts = %+v, want %+v", res.Parts, want)
	}
	if res.Usage != (llm.Usage{InputTokens: 12, OutputTokens: 34}) {
		t.Errorf("usage = %+v, want 12 in, 34 out", res.Usage)
	}
	if res.FinishReason != "stop" {
		t.Errorf("finish reason = %q, want stop", res.FinishReason)
	}
}

func TestStreamReasoning(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Reasoning: "Two plus two.", Text: "Four.", ChunkSize: 8})

	evs, res, err := run(t, p, hello())
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Event{
		{Type: llm.ReasoningDelta, Text: "Two plus"}, {Type: llm.ReasoningDelta, Text: " two."},
		{Type: llm.TextDelta, Text: "Four."},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Errorf("events = %+v, want %+v", evs, want)
	}
	wantParts := []chat.Part{{Type: chat.PartReasoning, Text: "Two plus two."}, chat.TextPart("Four.")}
	if !reflect.DeepEqual(res.Parts, wantParts) {
		t.Errorf("parts = %+v, want %+v", res.Parts, wantParts)
	}
}

func TestStreamParallelToolCalls(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{
		Text: "Checking.",
		ToolCalls: []llmtest.ToolCall{
			{ID: "toolu_01A", Name: "weather", Args: `{"city":"Paris"}`},
			{ID: "toolu_01B", Name: "clock", Args: `{"tz":"Europe/Rome"}`},
		},
		ChunkSize: 6,
		Usage:     llmtest.Usage{InputTokens: 100, OutputTokens: 50},
	})

	evs, res, err := run(t, p, hello())
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Event{
		{Type: llm.TextDelta, Text: "Checki"}, {Type: llm.TextDelta, Text: "ng."},
		{Type: llm.ToolCallStart, Index: 0, ToolCallID: "toolu_01A", ToolName: "weather"},
		{Type: llm.ToolCallDelta, Index: 0, Text: `{"city`}, {Type: llm.ToolCallDelta, Index: 0, Text: `":"Par`},
		{Type: llm.ToolCallDelta, Index: 0, Text: `is"}`},
		{Type: llm.ToolCallEnd, Index: 0},
		{Type: llm.ToolCallStart, Index: 1, ToolCallID: "toolu_01B", ToolName: "clock"},
		{Type: llm.ToolCallDelta, Index: 1, Text: `{"tz":`}, {Type: llm.ToolCallDelta, Index: 1, Text: `"Europ`},
		{Type: llm.ToolCallDelta, Index: 1, Text: `e/Rome`}, {Type: llm.ToolCallDelta, Index: 1, Text: `"}`},
		{Type: llm.ToolCallEnd, Index: 1},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Errorf("events =\n%+v\nwant\n%+v", evs, want)
	}
	wantParts := []chat.Part{
		chat.TextPart("Checking."),
		{Type: chat.PartToolCall, ToolCallID: "toolu_01A", ToolName: "weather", Args: json.RawMessage(`{"city":"Paris"}`)},
		{Type: chat.PartToolCall, ToolCallID: "toolu_01B", ToolName: "clock", Args: json.RawMessage(`{"tz":"Europe/Rome"}`)},
	}
	if !reflect.DeepEqual(res.Parts, wantParts) {
		t.Errorf("parts = %+v, want %+v", res.Parts, wantParts)
	}
	if res.FinishReason != "tool_calls" {
		t.Errorf("finish reason = %q, want tool_calls", res.FinishReason)
	}
	if res.Usage != (llm.Usage{InputTokens: 100, OutputTokens: 50}) {
		t.Errorf("usage = %+v, want 100 in, 50 out", res.Usage)
	}
}

func TestStreamToolCallWithoutArgs(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "toolu_01", Name: "now"}}})

	evs, res, err := run(t, p, hello())
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Event{
		{Type: llm.ToolCallStart, Index: 0, ToolCallID: "toolu_01", ToolName: "now"},
		{Type: llm.ToolCallEnd, Index: 0},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Errorf("events = %+v, want %+v", evs, want)
	}
	if len(res.Parts) != 1 || string(res.Parts[0].Args) != "{}" {
		t.Errorf("parts = %+v, want one call with args {}", res.Parts)
	}
}

func TestEmitErrorStopsTheCall(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Text: "a long answer, streamed in many pieces", ChunkSize: 1})
	stop := errors.New("stop")
	calls := 0
	_, err := p.Stream(context.Background(), hello(), func(llm.Event) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v, want the emit error", err)
	}
	if calls != 1 {
		t.Errorf("emit called %d times, want 1", calls)
	}
}

func TestErrorBodies(t *testing.T) {
	tests := []struct {
		status    int
		kind      string
		retryable bool
	}{
		{400, "bad_request", false},
		{401, "auth", false},
		{429, "rate_limited", true},
		{500, "server", true},
		{529, "overloaded", true},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			p, f := setup(t)
			f.Push(llmtest.Turn{Status: tt.status, ErrorMessage: "scripted failure"})
			evs, _, err := run(t, p, hello())
			e := apiError(t, err)
			if e.Kind != tt.kind || e.HTTPStatus != tt.status || e.Retryable != tt.retryable {
				t.Errorf("got kind %q, status %d, retryable %v; want %q, %d, %v",
					e.Kind, e.HTTPStatus, e.Retryable, tt.kind, tt.status, tt.retryable)
			}
			if e.Message != "scripted failure" {
				t.Errorf("Message = %q, want the body's message", e.Message)
			}
			if e.RetryAfter != 0 {
				t.Errorf("RetryAfter = %v without the header", e.RetryAfter)
			}
			if len(evs) != 0 {
				t.Errorf("events = %+v, want none", evs)
			}
		})
	}
}

func TestRateLimitRetryAfter(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Status: 429, RetryAfter: 7 * time.Second})

	_, _, err := run(t, p, hello())
	e := apiError(t, err)
	if e.Kind != "rate_limited" || !e.Retryable || e.RetryAfter != 7*time.Second {
		t.Errorf("got kind %q, retryable %v, retry after %v; want rate_limited, true, 7s", e.Kind, e.Retryable, e.RetryAfter)
	}
	if len(f.Requests()) != 1 {
		t.Errorf("the server saw %d requests, want 1 (the SDK must not retry)", len(f.Requests()))
	}
}

func TestOverloadedMidStream(t *testing.T) {
	p, f := setup(t)
	// message_start, content_block_start, ping, then two deltas, then the error event.
	f.Push(llmtest.Turn{Text: "partial answer", ChunkSize: 4, Status: 529, CutAfter: 5})

	evs, _, err := run(t, p, hello())
	e := apiError(t, err)
	if e.Kind != "overloaded" || !e.Retryable || e.HTTPStatus != 0 {
		t.Errorf("got kind %q, retryable %v, status %d; want overloaded, true, 0", e.Kind, e.Retryable, e.HTTPStatus)
	}
	want := []llm.Event{{Type: llm.TextDelta, Text: "part"}, {Type: llm.TextDelta, Text: "ial "}}
	if !reflect.DeepEqual(evs, want) {
		t.Errorf("events before the error = %+v, want %+v", evs, want)
	}
}

func TestCutStream(t *testing.T) {
	// After message_start, mid-text, and just before message_stop (8 events:
	// message_start, content_block_start, ping, 3 deltas, content_block_stop, message_delta).
	for _, cut := range []int{1, 4, 8} {
		p, f := setup(t)
		f.Push(llmtest.Turn{Text: "Hello", ChunkSize: 2, CutAfter: cut})
		_, _, err := run(t, p, hello())
		e := apiError(t, err)
		if e.Kind != "cut_stream" || !e.Retryable {
			t.Errorf("cut after %d: got kind %q, retryable %v; want cut_stream, true", cut, e.Kind, e.Retryable)
		}
	}
}

func TestStreamEndingWithoutMessageStopIsCut(t *testing.T) {
	// A proxy that ends the response cleanly, but early.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
	}))
	defer srv.Close()
	p := anthropic.New(anthropic.Config{Model: "m", BaseURL: srv.URL, APIKey: "k"})
	_, _, err := run(t, p, hello())
	if e := apiError(t, err); e.Kind != "cut_stream" || !e.Retryable {
		t.Errorf("got kind %q, retryable %v; want cut_stream, true", e.Kind, e.Retryable)
	}
}

func TestConnectionRefused(t *testing.T) {
	p := anthropic.New(anthropic.Config{Model: "m", BaseURL: "http://127.0.0.1:1", APIKey: "k"})
	_, _, err := run(t, p, hello())
	e := apiError(t, err)
	if e.Kind != "connection" || !e.Retryable {
		t.Errorf("got kind %q, retryable %v; want connection, true", e.Kind, e.Retryable)
	}
}

func TestSlowFirstChunkHonoursCancellation(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Text: "too late", FirstChunkDelay: time.Minute})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Stream(ctx, hello(), func(llm.Event) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	var e *llm.Error
	if errors.As(err, &e) {
		t.Errorf("a cancelled call returned %v; want the context's error, not a provider failure", e)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned %v after the call began; want promptly after the 100ms deadline", d)
	}
}

func TestSlowFirstChunkThenAnswer(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Text: "worth the wait", FirstChunkDelay: 50 * time.Millisecond})

	start := time.Now()
	_, res, err := run(t, p, hello())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("answered after %v, before the scripted delay", d)
	}
	if len(res.Parts) != 1 || res.Parts[0].Text != "worth the wait" {
		t.Errorf("parts = %+v", res.Parts)
	}
}

func TestNoTurnLeftIsServerError(t *testing.T) {
	p, _ := setup(t)
	_, _, err := run(t, p, hello())
	if e := apiError(t, err); e.Kind != "server" || !strings.Contains(e.Message, "no scripted turn") {
		t.Errorf("got %v, want a server error about the empty script", e)
	}
}
