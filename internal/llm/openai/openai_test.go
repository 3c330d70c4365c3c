package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/llm/openai"
)

// fake is what the tests use of an llmtest OpenAI fake.
type fake interface {
	Push(...llmtest.Turn)
	Requests() []llmtest.Request
}

// api is one of the two OpenAI APIs under test, with its fake.
type api struct {
	name     string
	start    func(t *testing.T) (fake, string)
	provider func(openai.Config) llm.Provider
	// cutAfterTwoDeltas is a CutAfter that cuts a text-only turn (chunk
	// size 4) right after its first two text deltas.
	cutAfterTwoDeltas int
}

var apis = []api{
	{
		name:              "openai",
		start:             func(t *testing.T) (fake, string) { f := llmtest.NewOpenAIChat(t); return f, f.URL },
		provider:          func(c openai.Config) llm.Provider { return openai.NewChat(c) },
		cutAfterTwoDeltas: 3, // role chunk, two content chunks
	},
	{
		name:              "openai-responses",
		start:             func(t *testing.T) (fake, string) { f := llmtest.NewOpenAIResponses(t); return f, f.URL },
		provider:          func(c openai.Config) llm.Provider { return openai.NewResponses(c) },
		cutAfterTwoDeltas: 6, // created, in_progress, item added, part added, two deltas
	},
}

// eachAPI runs test against both APIs, each with a fresh fake and a
// provider pointed at it.
func eachAPI(t *testing.T, test func(t *testing.T, a api, f fake, p llm.Provider)) {
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			f, url := a.start(t)
			p := a.provider(openai.Config{Model: "gpt-test", BaseURL: url, APIKey: "test-key", ReasoningSummary: "auto"})
			test(t, a, f, p)
		})
	}
}

var hello = llm.Request{Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("Hello?")}}}}

// stream makes one call and collects its events.
func stream(t *testing.T, p llm.Provider, req llm.Request) (llm.Result, []llm.Event, error) {
	t.Helper()
	var events []llm.Event
	res, err := p.Stream(context.Background(), req, func(e llm.Event) error {
		events = append(events, e)
		return nil
	})
	return res, events, err
}

// llmError asserts err is an *llm.Error and returns it.
func llmError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want an *llm.Error", err, err)
	}
	return e
}

// joined concatenates the text of the events of one type.
func joined(events []llm.Event, typ llm.EventType) (string, int) {
	var b strings.Builder
	n := 0
	for _, e := range events {
		if e.Type == typ {
			b.WriteString(e.Text)
			n++
		}
	}
	return b.String(), n
}

func TestText(t *testing.T) {
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		f.Push(llmtest.Turn{Text: "Hello, parley!", Usage: llmtest.Usage{InputTokens: 12, OutputTokens: 5}})
		res, events, err := stream(t, p, hello)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		text, n := joined(events, llm.TextDelta)
		if text != "Hello, parley!" || n != 4 || len(events) != n {
			t.Errorf("events = %+v", events)
		}
		want := llm.Result{Parts: []chat.Part{chat.TextPart("Hello, parley!")}, Usage: llm.Usage{InputTokens: 12, OutputTokens: 5}, FinishReason: "stop"}
		if !reflect.DeepEqual(res, want) {
			t.Errorf("result = %+v\nwant %+v", res, want)
		}
	})
}

func TestReasoning(t *testing.T) {
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		f.Push(llmtest.Turn{Reasoning: "Six times seven.", Text: "42"})
		res, events, err := stream(t, p, hello)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		reasoning, n := joined(events, llm.ReasoningDelta)
		if reasoning != "Six times seven." || n < 2 {
			t.Errorf("reasoning deltas %q in %d events", reasoning, n)
		}
		for i, e := range events {
			if e.Type == llm.TextDelta && i < n {
				t.Errorf("text delta at %d before the reasoning ended: %+v", i, events)
			}
		}
		want := []chat.Part{{Type: chat.PartReasoning, Text: "Six times seven."}, chat.TextPart("42")}
		if !reflect.DeepEqual(res.Parts, want) {
			t.Errorf("parts = %+v", res.Parts)
		}
	})
}

func TestParallelToolCalls(t *testing.T) {
	calls := []llmtest.ToolCall{
		{ID: "call_weather", Name: "get_weather", Args: `{"city":"Paris","unit":"celsius"}`},
		{ID: "call_time", Name: "get_time", Args: `{"tz":"Europe/Paris"}`},
	}
	for _, interleave := range []bool{false, true} {
		name := map[bool]string{false: "sequential", true: "interleaved"}[interleave]
		t.Run(name, func(t *testing.T) {
			eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
				f.Push(llmtest.Turn{Text: "Checking.", ToolCalls: calls, Interleave: interleave, ChunkSize: 5})
				res, events, err := stream(t, p, hello)
				if err != nil {
					t.Fatalf("Stream: %v", err)
				}
				checkCallEvents(t, events, calls, interleave)
				want := []chat.Part{
					chat.TextPart("Checking."),
					{Type: chat.PartToolCall, ToolCallID: "call_weather", ToolName: "get_weather", Args: json.RawMessage(calls[0].Args)},
					{Type: chat.PartToolCall, ToolCallID: "call_time", ToolName: "get_time", Args: json.RawMessage(calls[1].Args)},
				}
				if !reflect.DeepEqual(res.Parts, want) {
					t.Errorf("parts = %+v\nwant %+v", res.Parts, want)
				}
				if res.FinishReason != "tool_calls" {
					t.Errorf("finish = %q", res.FinishReason)
				}
			})
		})
	}
}

// checkCallEvents checks the tool call events: per call one start with its
// id and name, then its argument deltas adding up to its arguments, then
// one end; with interleave, the two calls' deltas must really interleave.
func checkCallEvents(t *testing.T, events []llm.Event, calls []llmtest.ToolCall, interleave bool) {
	t.Helper()
	type state struct {
		started, ended bool
		args           strings.Builder
		lastDelta      int
		firstDelta     int
	}
	st := make([]*state, len(calls))
	for i := range st {
		st[i] = &state{firstDelta: -1}
	}
	for pos, e := range events {
		if e.Type < llm.ToolCallStart {
			continue
		}
		if e.Index < 0 || e.Index >= len(calls) {
			t.Fatalf("event %d has index %d: %+v", pos, e.Index, e)
		}
		s := st[e.Index]
		switch e.Type {
		case llm.ToolCallStart:
			if s.started || e.ToolCallID != calls[e.Index].ID || e.ToolName != calls[e.Index].Name {
				t.Errorf("start %d: %+v", pos, e)
			}
			s.started = true
		case llm.ToolCallDelta:
			if !s.started || s.ended {
				t.Errorf("delta %d outside its call: %+v", pos, e)
			}
			s.args.WriteString(e.Text)
			s.lastDelta = pos
			if s.firstDelta < 0 {
				s.firstDelta = pos
			}
		case llm.ToolCallEnd:
			if !s.started || s.ended {
				t.Errorf("end %d: %+v", pos, e)
			}
			s.ended = true
		}
	}
	for i, s := range st {
		if !s.ended || s.args.String() != calls[i].Args {
			t.Errorf("call %d: ended %v, args %q, want %q", i, s.ended, s.args.String(), calls[i].Args)
		}
	}
	if overlap := st[1].firstDelta < st[0].lastDelta; overlap != interleave {
		t.Errorf("interleaved deltas = %v, want %v: %+v", overlap, interleave, events)
	}
}

func TestToolCallArguments(t *testing.T) {
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		f.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: "now"},
			{ID: "c2", Name: "broken", Args: `{"a":`},
		}})
		res, _, err := stream(t, p, hello)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if got := string(res.Parts[0].Args); got != `{}` {
			t.Errorf("empty arguments became %s, want {}", got)
		}
		if got := string(res.Parts[1].Args); got != `"{\"a\":"` {
			t.Errorf("invalid arguments became %s, want them as a JSON string", got)
		}
	})
}

func TestErrorBody(t *testing.T) {
	cases := []struct {
		status    int
		message   string
		kind      string
		retryable bool
	}{
		{400, "Invalid value for 'messages'.", "bad_request", false},
		{401, "", "auth", false},
		{404, "", "not_found", false},
		{429, "", "rate_limited", true},
		{500, "", "server", true},
		{503, "", "overloaded", true},
	}
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		for _, c := range cases {
			f.Push(llmtest.Turn{Status: c.status, ErrorMessage: c.message, RetryAfter: 3 * time.Second})
			_, events, err := stream(t, p, hello)
			e := llmError(t, err)
			if e.Kind != c.kind || e.Provider != a.name || e.HTTPStatus != c.status || e.Retryable != c.retryable || e.RetryAfter != 3*time.Second {
				t.Errorf("HTTP %d: %+v", c.status, e)
			}
			if e.Message == "" || (c.message != "" && e.Message != c.message) {
				t.Errorf("HTTP %d: message %q, want %q", c.status, e.Message, c.message)
			}
			if len(events) != 0 {
				t.Errorf("HTTP %d: events %+v", c.status, events)
			}
		}
		if n := len(f.Requests()); n != len(cases) {
			t.Errorf("%d requests, want %d: the SDK must not retry by itself", n, len(cases))
		}
	})
}

func TestErrorEventMidStream(t *testing.T) {
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		f.Push(llmtest.Turn{Text: "Hello there", Status: 500, ErrorMessage: "The server had an error.", CutAfter: a.cutAfterTwoDeltas})
		_, events, err := stream(t, p, hello)
		e := llmError(t, err)
		if e.Kind != "server" || !e.Retryable || e.HTTPStatus != 0 || e.Message != "The server had an error." || e.Provider != a.name {
			t.Errorf("error = %+v", e)
		}
		if text, _ := joined(events, llm.TextDelta); text != "Hello th" {
			t.Errorf("streamed %q before the error", text)
		}
	})
}

func TestNoKeyAndNoEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			f, url := a.start(t)
			p := a.provider(openai.Config{Model: "m", BaseURL: url})
			f.Push(llmtest.Turn{Text: "unused"})
			_, _, err := stream(t, p, hello)
			if e := llmError(t, err); e.Kind != "auth" {
				t.Errorf("error = %+v, want the fake's 401", e)
			}
			reqs := f.Requests()
			if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "" {
				t.Fatalf("requests = %+v: no key must mean no Authorization header", reqs)
			}
		})
	}
}

func TestCancelledContext(t *testing.T) {
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		f.Push(llmtest.Turn{Text: "late", FirstChunkDelay: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := p.Stream(ctx, hello, func(llm.Event) error { return nil })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's error", err)
		}
	})
}

func TestEmitErrorStopsTheStream(t *testing.T) {
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		f.Push(llmtest.Turn{Text: "one two three four"})
		boom := errors.New("subscriber gone")
		n := 0
		_, err := p.Stream(context.Background(), hello, func(llm.Event) error { n++; return boom })
		if err != boom || n != 1 {
			t.Fatalf("err = %v after %d events, want emit's error as is after 1", err, n)
		}
	})
}
