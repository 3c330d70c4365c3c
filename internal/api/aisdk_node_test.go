package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/nodetest"
)

// TestNodeAISDK runs the AI SDK itself (testdata/ai_sdk_chat.cjs: npm "ai"'s
// AbstractChat with DefaultChatTransport, parseJsonEventStream with
// uiMessageChunkSchema, readUIMessageStream) against POST
// /api/v1/ai-sdk/chat and its resume and messages routes, one case per
// subtest on a fresh server whose fake model is scripted for it.
func TestNodeAISDK(t *testing.T) {
	nodetest.Modules(t)
	script, err := filepath.Abs(filepath.Join("testdata", "ai_sdk_chat.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, s *server, name string, env map[string]string) map[string]string {
		t.Helper()
		e := map[string]string{"PARLEY_URL": s.url, "PARLEY_TOKEN": s.token("alice"), "CASE": name}
		for k, v := range env {
			e[k] = v
		}
		out := nodetest.Run(t, script, e)
		var got map[string]string
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("script output %q: %v", out, err)
		}
		return got
	}
	live := func(t *testing.T) (*server, *llmtest.OpenAIChat) {
		fake := llmtest.NewOpenAIChat(t)
		at := newApprovalTools(t)
		return newLive(t, fake, func(su *setup) { su.tools = at.reg }), fake
	}

	t.Run("text", func(t *testing.T) {
		s, fake := live(t)
		fake.Push(llmtest.Turn{Text: "Hello from parley.", ChunkSize: 3}, llmtest.Turn{Text: "Second answer."})
		got := run(t, s, "text", nil)
		msgs := s.messages(s.token("alice"), s.listChats(s.token("alice"), "?label=ai-sdk-chat:c-text").Chats[0].ID)
		if got["message_id"] != "msg-"+jsonInt(msgs[1].ID) {
			t.Fatalf("start messageId %q, the answer is message %d", got["message_id"], msgs[1].ID)
		}
	})

	t.Run("client_tool", func(t *testing.T) {
		s, fake := live(t)
		fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Paris"}`}}},
			llmtest.Turn{Text: "Sunny in Paris."})
		run(t, s, "client_tool", nil)
	})

	t.Run("server_tool", func(t *testing.T) {
		s, fake := live(t)
		fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_c", Name: "clock", Args: `{}`}}},
			llmtest.Turn{Text: "It is noon."})
		run(t, s, "server_tool", nil)
	})

	t.Run("approvals", func(t *testing.T) {
		s, fake := live(t)
		add := llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_a", Name: "add", Args: `{"a":1,"b":2}`}}}
		fake.Push(add, llmtest.Turn{Text: "It is 3."}, add, llmtest.Turn{Text: "Not allowed."})
		got := run(t, s, "approvals", nil)
		if got["approved"] != "output-available" || got["denied"] != "output-denied" ||
			got["approved_text"] != "It is 3." || got["denied_text"] != "Not allowed." {
			t.Fatalf("client saw %v", got)
		}
	})

	t.Run("regenerate", func(t *testing.T) {
		s, fake := live(t)
		fake.Push(llmtest.Turn{Text: "First."}, llmtest.Turn{Text: "Second."})
		run(t, s, "regenerate", nil)
	})

	t.Run("resume", func(t *testing.T) {
		s, fake := live(t)
		gate := make(chan struct{})
		var once sync.Once
		gateSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(gate) })
		}))
		t.Cleanup(gateSrv.Close)
		fake.Push(llmtest.Turn{Text: "A slow answer, in full.", ChunkSize: 2, Gate: gate, GateAfter: 4})
		run(t, s, "resume", map[string]string{"GATE_URL": gateSrv.URL})
	})

	// gated returns a server whose first model turn is held until the
	// script posts to the returned URL.
	gated := func(t *testing.T, first llmtest.Turn, more ...llmtest.Turn) (*server, string) {
		s, fake := live(t)
		gate := make(chan struct{})
		var once sync.Once
		gateSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(gate) })
		}))
		t.Cleanup(gateSrv.Close)
		t.Cleanup(func() { once.Do(func() { close(gate) }) })
		first.Gate = gate
		fake.Push(append([]llmtest.Turn{first}, more...)...)
		return s, gateSrv.URL
	}

	t.Run("resume_new", func(t *testing.T) {
		s, fake := live(t)
		fake.Push(llmtest.Turn{Text: "Hello, new chat."})
		run(t, s, "resume_new", nil)
	})

	t.Run("stop", func(t *testing.T) {
		s, _ := gated(t, llmtest.Turn{Text: "A long answer that is never finished.", ChunkSize: 2, GateAfter: 3})
		run(t, s, "stop", nil)
		c := s.listChats(s.token("alice"), "?label=ai-sdk-chat:c-stop").Chats[0]
		if c.Status != chat.Waiting {
			t.Fatalf("the stopped chat is %s", c.Status)
		}
	})

	t.Run("fork", func(t *testing.T) {
		s, fake := live(t)
		fake.Push(llmtest.Turn{Text: "First."}, llmtest.Turn{Text: "Second."})
		got := run(t, s, "fork", nil)
		tok := s.token("alice")
		if n := len(s.messages(tok, got["original"])); n != 4 {
			t.Fatalf("the original has %d messages, want 4", n)
		}
		if n := len(s.messages(tok, got["fork"])); n != 2 {
			t.Fatalf("the fork has %d messages, want 2", n)
		}
		if l := s.listChats(tok, "?label=ai-sdk-chat:c-fork").Chats; len(l) != 1 || l[0].ID != got["original"] {
			t.Fatalf("chats labelled ai-sdk-chat:c-fork: %v, want only the original", chatIDs(l))
		}
	})

	t.Run("reload_queued", func(t *testing.T) {
		s, url := gated(t, llmtest.Turn{Text: "A slow answer, in full.", ChunkSize: 2, GateAfter: 4},
			llmtest.Turn{Text: "The queued answer."})
		run(t, s, "reload_queued", map[string]string{"GATE_URL": url})
	})

	t.Run("error", func(t *testing.T) {
		s, fake := live(t)
		bad := llmtest.Turn{Status: http.StatusBadRequest, ErrorMessage: "the model refuses"}
		fake.Push(bad, bad)
		got := run(t, s, "error", nil)
		if got["error"] == "" {
			t.Fatalf("client saw no error: %v", got)
		}
	})
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }
