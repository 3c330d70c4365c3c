package llmtest_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// postAnthropic sends a Messages request to the fake, with or without an API key.
func postAnthropic(t *testing.T, f *llmtest.Anthropic, key string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.URL+"/v1/messages",
		strings.NewReader(`{"model":"claude-x","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// anthropicEvent is one parsed server-sent event.
type anthropicEvent struct {
	name string
	data map[string]any
}

// readAnthropicSSE parses events until the body ends; it returns the read error, if any.
func readAnthropicSSE(t *testing.T, body io.Reader) ([]anthropicEvent, error) {
	t.Helper()
	var evs []anthropicEvent
	var name string
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var data map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data); err != nil {
				t.Fatalf("event %s: data is not JSON: %v", name, err)
			}
			evs = append(evs, anthropicEvent{name, data})
		case line == "":
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return evs, sc.Err()
}

func TestAnthropicStreamWireFormat(t *testing.T) {
	f := llmtest.NewAnthropic(t)
	f.Push(llmtest.Turn{
		Reasoning: "hmm", Text: "Hi there",
		ToolCalls: []llmtest.ToolCall{{ID: "toolu_a", Name: "a", Args: `{"x":1}`}, {Name: "b", Args: `{}`}},
		ChunkSize: 5, Usage: llmtest.Usage{InputTokens: 9, OutputTokens: 21},
	})
	res := postAnthropic(t, f, "k")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	evs, err := readAnthropicSSE(t, res.Body)
	if err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, e := range evs {
		names = append(names, e.name)
		if e.data["type"] != e.name {
			t.Errorf("event %s carries type %v", e.name, e.data["type"])
		}
	}
	want := []string{
		"message_start",
		"content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_stop", // thinking + signature
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", // text
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", // tool a
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", // tool b
		"message_delta", "message_stop",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("events =\n%v\nwant\n%v", names, want)
	}
	start := evs[0].data["message"].(map[string]any)
	if start["model"] != "claude-x" || start["usage"].(map[string]any)["input_tokens"] != 9.0 {
		t.Errorf("message_start = %v", start)
	}
	delta := func(i int) map[string]any { return evs[i].data["delta"].(map[string]any) }
	block := func(i int) map[string]any { return evs[i].data["content_block"].(map[string]any) }
	if block(1)["type"] != "thinking" || delta(3)["thinking"] != "hmm" || delta(4)["type"] != "signature_delta" || delta(4)["signature"] == "" {
		t.Errorf("thinking block = %v %v %v", block(1), delta(3), delta(4))
	}
	if block(6)["type"] != "text" || delta(7)["text"] != "Hi th" || delta(8)["text"] != "ere" || evs[7].data["index"] != 1.0 {
		t.Errorf("text block = %v %v %v", block(6), evs[7].data, delta(8))
	}
	if b := block(10); b["type"] != "tool_use" || b["id"] != "toolu_a" || b["name"] != "a" || !reflect.DeepEqual(b["input"], map[string]any{}) {
		t.Errorf("tool_use start = %v", b)
	}
	if delta(11)["partial_json"] != "" || delta(12)["partial_json"] != `{"x":` || delta(13)["partial_json"] != `1}` {
		t.Errorf("tool a deltas = %v %v %v", delta(11), delta(12), delta(13))
	}
	if id := block(15)["id"]; id == "" || id == "toolu_a" {
		t.Errorf("a call with no scripted id got id %v, want a fresh one", id)
	}
	md := evs[19].data
	if delta(19)["stop_reason"] != "tool_use" || md["usage"].(map[string]any)["output_tokens"] != 21.0 {
		t.Errorf("message_delta = %v", md)
	}
	if reqs := f.Requests(); len(reqs) != 1 || reqs[0].Header.Get("x-api-key") != "k" {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestAnthropicErrorAnswer(t *testing.T) {
	f := llmtest.NewAnthropic(t)
	f.Push(llmtest.Turn{Status: 429, RetryAfter: 1500 * time.Millisecond})
	res := postAnthropic(t, f, "k")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 429 || res.Header.Get("retry-after") != "2" || res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("status %d, retry-after %q, content type %q", res.StatusCode, res.Header.Get("retry-after"), res.Header.Get("Content-Type"))
	}
	var got struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Type != "error" || got.Error.Type != "rate_limit_error" || got.Error.Message == "" {
		t.Errorf("body %s (%v)", body, err)
	}
}

func TestAnthropicErrorMidStream(t *testing.T) {
	f := llmtest.NewAnthropic(t)
	f.Push(llmtest.Turn{Text: "abcdefgh", Status: 529, ErrorMessage: "Overloaded", CutAfter: 4})
	res := postAnthropic(t, f, "k")
	evs, err := readAnthropicSSE(t, res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || len(evs) != 5 || evs[3].name != "content_block_delta" {
		t.Fatalf("status %d, events %v", res.StatusCode, evs)
	}
	last := evs[4]
	want := map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}}
	if last.name != "error" || !reflect.DeepEqual(last.data, want) {
		t.Errorf("last event = %s %v, want error %v", last.name, last.data, want)
	}
}

func TestAnthropicCutAfter(t *testing.T) {
	f := llmtest.NewAnthropic(t)
	f.Push(llmtest.Turn{Text: "abcdefgh", CutAfter: 3})
	res := postAnthropic(t, f, "k")
	evs, err := readAnthropicSSE(t, res.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error = %v, want io.ErrUnexpectedEOF (a dropped connection)", err)
	}
	if len(evs) != 3 {
		t.Errorf("got %d events before the cut, want 3", len(evs))
	}
}

func TestAnthropicRequiresKey(t *testing.T) {
	f := llmtest.NewAnthropic(t)
	f.Push(llmtest.Turn{Text: "never"})
	res := postAnthropic(t, f, "")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 401 || !strings.Contains(string(body), `"authentication_error"`) {
		t.Errorf("status %d, body %s; want 401 authentication_error", res.StatusCode, body)
	}
}
