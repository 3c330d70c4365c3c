package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// uiChunks posts body to /api/v1/ai-sdk/chat and returns the stream's
// chunks (their JSON objects) and whether it ended with [DONE].
func uiChunks(t *testing.T, s *server, tok string, body any) ([]map[string]any, bool) {
	t.Helper()
	r := s.do("POST", "/api/v1/ai-sdk/chat", tok, body)
	if r.status != http.StatusOK {
		t.Fatalf("POST /ai-sdk/chat: %d %s", r.status, r.body)
	}
	if got := r.header.Get("X-Vercel-Ai-Ui-Message-Stream"); got != "v1" {
		t.Fatalf("x-vercel-ai-ui-message-stream = %q", got)
	}
	var out []map[string]any
	done := false
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		out = append(out, c)
	}
	return out, done
}

func chunkTypes(cs []map[string]any) string {
	var ts []string
	for _, c := range cs {
		ts = append(ts, c["type"].(string))
	}
	return strings.Join(ts, ",")
}

func userMsg(text string) map[string]any {
	return map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}
}

func TestAISDKChatPlainAndClientTool(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	s := newLive(t, fake)
	tok := s.token("alice")

	fake.Push(llmtest.Turn{Text: "Hello there", ChunkSize: 5})
	cs, done := uiChunks(t, s, tok, map[string]any{"id": "client-1", "trigger": "submit-message",
		"messages": []any{userMsg("hi")},
		"parley": map[string]any{"title": "t", "dynamic_tools": []any{map[string]any{"name": "ask", "description": "ask the user",
			"input_schema": map[string]any{"type": "object"}}}}})
	// The answer's deltas may arrive merged (the engine flushes what
	// streamed since its last write): one or more text-deltas that make
	// the whole text.
	types := chunkTypes(cs)
	merged := regexp.MustCompile(`^start,start-step,text-start,(text-delta,)+text-end,finish-step,finish$`)
	if !merged.MatchString(types) || !done {
		t.Fatalf("chunks = %s (done %v), want start, step, text with its deltas, finish; %v", types, done, cs)
	}
	var text strings.Builder
	for _, c := range cs {
		if c["type"] == "text-delta" {
			if c["id"] != cs[2]["id"] {
				t.Fatalf("delta %v is not of text %v", c, cs[2]["id"])
			}
			text.WriteString(c["delta"].(string))
		}
	}
	if end := cs[len(cs)-3]; text.String() != "Hello there" || end["id"] != cs[2]["id"] ||
		cs[len(cs)-1]["finishReason"] != "stop" || cs[0]["messageId"] == nil {
		t.Fatalf("text %q; chunks = %v", text.String(), cs)
	}
	chats := s.listChats(tok, "?label=ai-sdk-chat:client-1").Chats
	if len(chats) != 1 || chats[0].Labels["api"] != "ai-sdk" {
		t.Fatalf("chats of client-1 = %+v", chats)
	}

	// A client tool call: the stream finishes while the chat waits.
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "ask", Args: `{"q":"x"}`}}})
	cs, _ = uiChunks(t, s, tok, map[string]any{"id": "client-1", "trigger": "submit-message", "messages": []any{userMsg("ask me")}})
	last := cs[len(cs)-1]
	if last["finishReason"] != "tool-calls" || !strings.Contains(chunkTypes(cs), "tool-input-available") {
		t.Fatalf("chunks = %v", cs)
	}
	var avail map[string]any
	for _, c := range cs {
		if c["type"] == "tool-input-available" {
			avail = c
		}
	}
	if avail["toolCallId"] != "call_1" || avail["dynamic"] != true || avail["providerExecuted"] != false {
		t.Fatalf("tool-input-available = %v", avail)
	}

	// Ids that do not match the pending calls: 400; an unreadable last message: 400.
	answer := func(id string) map[string]any {
		return map[string]any{"id": "a1", "role": "assistant", "parts": []any{map[string]any{"type": "dynamic-tool",
			"toolName": "ask", "toolCallId": id, "state": "output-available", "input": map[string]any{}, "output": "yes"}}}
	}
	s.do("POST", "/api/v1/ai-sdk/chat", tok, map[string]any{"id": "client-1", "messages": []any{answer("call_9")}}).
		expectError(t, http.StatusBadRequest, "invalid_tool_results")
	s.do("POST", "/api/v1/ai-sdk/chat", tok, map[string]any{"id": "client-1", "messages": []any{map[string]any{"id": "x", "role": "assistant", "parts": []any{}}}}).
		expectError(t, http.StatusBadRequest, "invalid_field")
	// Another owner's chat is not found.
	s.do("POST", "/api/v1/ai-sdk/chat", s.token("bob"), map[string]any{"id": chats[0].ID, "messages": []any{answer("call_1")}}).
		expectError(t, http.StatusNotFound, "not_found")

	// The output continues the run, in the client's assistant message.
	fake.Push(llmtest.Turn{Text: "Thanks"})
	cs, done = uiChunks(t, s, tok, map[string]any{"id": "client-1", "messages": []any{answer("call_1")}})
	if cs[0]["type"] != "start" || cs[0]["messageId"] != "a1" || cs[len(cs)-1]["finishReason"] != "stop" || !done {
		t.Fatalf("chunks = %v", cs)
	}
	if !strings.Contains(chunkTypes(cs), "text-delta") {
		t.Fatalf("chunks = %s", chunkTypes(cs))
	}
	// Nothing runs: the resume route answers 204.
	if r := s.do("GET", "/api/v1/ai-sdk/chat/client-1/stream", tok, nil); r.status != http.StatusNoContent {
		t.Fatalf("resume = %d", r.status)
	}
	var msgs []map[string]any
	s.do("GET", "/api/v1/ai-sdk/chat/client-1/messages", tok, nil).expect(t, http.StatusOK, &msgs)
	if len(msgs) != 4 || msgs[3]["role"] != "assistant" {
		t.Fatalf("messages = %v", msgs)
	}
}

// TestAISDKQueuedMessage: a message sent while the chat runs is queued; its
// stream skips the run in progress and carries its own answer only.
func TestAISDKQueuedMessage(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	s := newLive(t, fake)
	tok := s.token("alice")
	gate := make(chan struct{})
	fake.Push(llmtest.Turn{Text: "The first answer.", ChunkSize: 3, Gate: gate, GateAfter: 2}, llmtest.Turn{Text: "The second answer."})
	first := openUI(t, s, "POST", "/api/v1/ai-sdk/chat", tok, map[string]any{"id": "c-q", "parley": map[string]any{"title": "t"},
		"messages": []any{userMsg("one")}})
	var delta string
	for c := first.next(); ; c = first.next() {
		if c["type"] == "text-delta" {
			delta = c["delta"].(string)
			break
		}
	}
	second := openUI(t, s, "POST", "/api/v1/ai-sdk/chat", tok, map[string]any{"id": "c-q", "messages": []any{userMsg("two")}})
	close(gate)
	_, rest := first.rest(first.next())
	types, text := second.rest(second.next())
	if delta+rest != "The first answer." || text != "The second answer." {
		t.Fatalf("first stream %q, second %q", delta+rest, text)
	}
	if j := strings.Join(types, ","); !strings.HasPrefix(j, "start,start-step,text-start") || !strings.HasSuffix(j, "finish") {
		t.Fatalf("second stream %s", j)
	}
}

// TestAISDKMixedAnswers: a step with a client call and a call to approve,
// answered in two requests; the second resends the first's output (the
// client's message keeps it), which parley drops; a wrong decision id
// refuses the whole answer before anything is written.
func TestAISDKMixedAnswers(t *testing.T) {
	fake := llmtest.NewOpenAIChat(t)
	at := newApprovalTools(t)
	s := newLive(t, fake, func(su *setup) { su.tools = at.reg })
	tok := s.token("alice")
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "ask", Args: `{}`}, {ID: "a1", Name: "add", Args: `{"a":1,"b":2}`}}},
		llmtest.Turn{Text: "Done."})
	cs, _ := uiChunks(t, s, tok, map[string]any{"id": "c-mix", "messages": []any{userMsg("go")},
		"parley": map[string]any{"title": "t", "approve": []string{"add"},
			"dynamic_tools": []any{map[string]any{"name": "ask", "description": "ask", "input_schema": map[string]any{"type": "object"}}}}})
	if !strings.Contains(chunkTypes(cs), "tool-approval-request") || cs[len(cs)-1]["finishReason"] != "tool-calls" {
		t.Fatalf("chunks %s", chunkTypes(cs))
	}
	output := map[string]any{"type": "dynamic-tool", "toolName": "ask", "toolCallId": "c1", "state": "output-available", "input": map[string]any{}, "output": "yes"}
	approval := func(id string) map[string]any {
		return map[string]any{"type": "dynamic-tool", "toolName": "add", "toolCallId": id, "state": "approval-responded",
			"providerExecuted": true, "input": map[string]any{}, "approval": map[string]any{"id": id, "approved": true}}
	}
	answer := func(parts ...any) map[string]any {
		return map[string]any{"id": "c-mix", "messages": []any{map[string]any{"id": "m1", "role": "assistant", "parts": parts}}}
	}
	// A decision for a call that waits for none: refused, and the output is not kept.
	s.do("POST", "/api/v1/ai-sdk/chat", tok, answer(output, approval("zz"))).expectError(t, http.StatusBadRequest, "invalid_decisions")
	// The output alone: the chat still waits for the approval.
	cs, done := uiChunks(t, s, tok, answer(output, map[string]any{"type": "dynamic-tool", "toolName": "add", "toolCallId": "a1",
		"state": "approval-requested", "providerExecuted": true, "input": map[string]any{}, "approval": map[string]any{"id": "a1"}}))
	if !done || cs[len(cs)-1]["finishReason"] != "tool-calls" {
		t.Fatalf("after the output: %v", cs)
	}
	// The approval, with the output sent again: the run goes on.
	cs, _ = uiChunks(t, s, tok, answer(output, approval("a1")))
	if j := chunkTypes(cs); !strings.Contains(j, "tool-output-available") || !strings.Contains(j, "text-delta") || cs[len(cs)-1]["finishReason"] != "stop" {
		t.Fatalf("after the approval: %v", cs)
	}
	// Everything in it is answered already: 409.
	s.do("POST", "/api/v1/ai-sdk/chat", tok, answer(output, approval("a1"))).expectError(t, http.StatusConflict, "status_conflict")
}
