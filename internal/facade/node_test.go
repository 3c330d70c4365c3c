package facade_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/nodetest"
)

// TestNodeOpenAIClient runs the official openai Node client
// (testdata/openai_client.cjs) against the facade, one case per subtest,
// each on a fresh server whose fake model is scripted for it. The script
// asserts what the client sees (the SDK's own stream helper checks the
// chunk sequence); the test checks what the model got.
func TestNodeOpenAIClient(t *testing.T) {
	nodetest.Modules(t)
	script, err := filepath.Abs(filepath.Join("testdata", "openai_client.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, r *replica, tok, name string) map[string]string {
		t.Helper()
		out := nodetest.Run(t, script, map[string]string{"PARLEY_URL": r.url + "/v1", "PARLEY_TOKEN": tok, "CASE": name,
			"PARLEY_PNG": base64.StdEncoding.EncodeToString(llmtest.PNG)})
		var got map[string]string
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("script output %q: %v", out, err)
		}
		return got
	}

	t.Run("text", func(t *testing.T) {
		r, fake := newSQLite(t)
		fake.Push(llmtest.Turn{Text: "Hello from the fake.", Usage: llmtest.Usage{InputTokens: 10, OutputTokens: 4}})
		got := run(t, r, r.token("alice"), "text")
		ch := r.onlyChat("alice")
		if !strings.HasPrefix(got["id"], "chatcmpl-"+ch.ID+"-") {
			t.Fatalf("completion id %q, chat %s", got["id"], ch.ID)
		}
		if msgs, _ := modelRequest(t, fake, 0); !slices.Equal(roles(msgs), []string{"system", "user"}) {
			t.Fatalf("model got %v", roles(msgs))
		}
	})

	t.Run("tools", func(t *testing.T) {
		r, fake := newSQLite(t)
		fake.Push(
			llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Paris"}`}}},
			llmtest.Turn{Text: "Sunny in Paris."},
		)
		got := run(t, r, r.token("alice"), "tools")
		if got["call_id"] != "call_w" {
			t.Fatalf("the client got call %q", got["call_id"])
		}
		r.onlyChat("alice") // the second request continued the first's chat
		nodeCheckResult(t, fake, 1, "call_w", "sunny")
	})

	t.Run("stream", func(t *testing.T) {
		r, fake := newSQLite(t)
		fake.Push(
			llmtest.Turn{Text: "Let me check.", ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Rome"}`}},
				ChunkSize: 3, Usage: llmtest.Usage{InputTokens: 10, OutputTokens: 4}},
			llmtest.Turn{Text: "Rainy in Rome.", ChunkSize: 2},
		)
		got := run(t, r, r.token("alice"), "stream")
		if got["call_id"] != "call_w" {
			t.Fatalf("the client got call %q", got["call_id"])
		}
		r.onlyChat("alice")
		nodeCheckResult(t, fake, 1, "call_w", "rain")
	})

	t.Run("server_tool", func(t *testing.T) {
		r, fake := newSQLite(t)
		srv := llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_srv", Name: serverTool, Args: `{"q":"meaning"}`}}}
		fake.Push(srv, llmtest.Turn{Text: "The answer is 42."}, srv, llmtest.Turn{Text: "Still 42.", ChunkSize: 3})
		run(t, r, r.token("alice"), "server_tool")
		if _, tools := modelRequest(t, fake, 0); !slices.Contains(tools, serverTool) || !slices.Contains(tools, "get_weather") {
			t.Fatalf("the model was offered %v", tools)
		}
		// Each request ran the server-side tool inside it: the model's
		// second call of each carried its result.
		nodeCheckResult(t, fake, 1, "call_srv", lookupResult)
		nodeCheckResult(t, fake, 3, "call_srv", lookupResult)
		if n := len(r.chats("alice")); n != 2 {
			t.Fatalf("alice has %d chats, want 2", n)
		}
	})

	t.Run("image", func(t *testing.T) {
		r, fake := newSQLite(t)
		fake.Push(llmtest.Turn{Text: "A red pixel."})
		got := run(t, r, r.token("alice"), "image")
		if got["text"] != "A red pixel." {
			t.Fatalf("the client got %q", got["text"])
		}
		parts := upstreamParts(t, fake, 0)
		if len(parts) != 2 || parts[1]["type"] != "image_url" {
			t.Fatalf("the model got %v", parts)
		}
		url, _ := parts[1]["image_url"].(map[string]any)["url"].(string)
		if !bytes.Equal(dataURLBytes(t, url, "image/png"), llmtest.PNG) {
			t.Error("the model did not get the client's image")
		}
		if n := len(fake.Requests()); n != 1 {
			t.Fatalf("the model got %d requests: the refused image reached it", n)
		}
		r.onlyChat("alice")
	})

	t.Run("structured", func(t *testing.T) {
		r, fake := newSQLite(t)
		prose, person := llmtest.Turn{Text: proseAnswer}, llmtest.Turn{Text: fencedAnswer}
		fake.Push(prose, person, prose, person)
		got := run(t, r, r.token("alice"), "structured")
		checkPerson(t, got["completion"])
		checkPerson(t, got["response"])
		chats := r.chats("alice")
		if len(chats) != 2 {
			t.Fatalf("alice has %d chats, want 2", len(chats))
		}
		for _, ch := range chats {
			if n := repairs(t, r, ch.ID); n != 1 {
				t.Fatalf("chat %s had %d repair requests, want 1", ch.ID, n)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		r, fake := newSQLite(t)
		run(t, r, r.token("alice"), "errors")
		if n := len(fake.Requests()); n != 0 {
			t.Fatalf("the model got %d requests", n)
		}
		if n := len(r.chats("alice")); n != 0 {
			t.Fatalf("alice has %d chats", n)
		}
	})
}

// TestNodeOpenAIResponses runs the Responses cases of the same script:
// the client's create and its stream helper (finalResponse), function
// calls answered by previous_response_id and function_call_output.
func TestNodeOpenAIResponses(t *testing.T) {
	nodetest.Modules(t)
	script, err := filepath.Abs(filepath.Join("testdata", "openai_client.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, r *replica, name string) map[string]string {
		t.Helper()
		out := nodetest.Run(t, script, map[string]string{"PARLEY_URL": r.url + "/v1", "PARLEY_TOKEN": r.token("alice"), "CASE": name,
			"PARLEY_PNG": base64.StdEncoding.EncodeToString(llmtest.PNG), "PARLEY_PDF": base64.StdEncoding.EncodeToString(llmtest.PDF)})
		var got map[string]string
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("script output %q: %v", out, err)
		}
		return got
	}

	t.Run("text", func(t *testing.T) {
		r, fake := newSQLite(t)
		fake.Push(llmtest.Turn{Text: "Hello from the fake.", Usage: llmtest.Usage{InputTokens: 10, OutputTokens: 4}}, llmtest.Turn{Text: "Bye."})
		got := run(t, r, "resp_text")
		ch := r.onlyChat("alice") // the second request continued the first's chat
		if !strings.HasPrefix(got["id"], "resp_"+ch.ID+"_") || ch.Labels["api"] != "openai-responses" {
			t.Fatalf("response id %q, chat %+v", got["id"], ch)
		}
		if msgs, _ := modelRequest(t, fake, 1); !slices.Equal(roles(msgs), []string{"system", "user", "assistant", "user"}) {
			t.Fatalf("model got %v", roles(msgs))
		}
	})

	t.Run("tools", func(t *testing.T) {
		r, fake := newSQLite(t)
		fake.Push(
			llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Paris"}`}}},
			llmtest.Turn{Text: "Sunny in Paris."},
		)
		if got := run(t, r, "resp_tools"); got["call_id"] != "call_w" {
			t.Fatalf("the client got call %q", got["call_id"])
		}
		r.onlyChat("alice")
		nodeCheckResult(t, fake, 1, "call_w", "sunny")
	})

	t.Run("stream", func(t *testing.T) {
		r, fake := newSQLite(t)
		fake.Push(
			llmtest.Turn{Text: "Let me check.", ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Rome"}`}},
				ChunkSize: 3, Usage: llmtest.Usage{InputTokens: 10, OutputTokens: 4}},
			llmtest.Turn{Text: "Rainy in Rome.", ChunkSize: 2},
		)
		if got := run(t, r, "resp_stream"); got["call_id"] != "call_w" {
			t.Fatalf("the client got call %q", got["call_id"])
		}
		r.onlyChat("alice")
		nodeCheckResult(t, fake, 1, "call_w", "rain")
	})

	t.Run("files", func(t *testing.T) {
		r, fake := newSQLite(t, func(d *api.Deps) { d.Config.Models[0].Inputs = []string{"text", "image", "pdf"} })
		fake.Push(llmtest.Turn{Text: "Both are red."})
		if got := run(t, r, "resp_files"); got["text"] != "Both are red." {
			t.Fatalf("the client got %q", got["text"])
		}
		parts := upstreamParts(t, fake, 0)
		if len(parts) != 3 || parts[1]["type"] != "image_url" || parts[2]["type"] != "file" {
			t.Fatalf("the model got %v", parts)
		}
		file, _ := parts[2]["file"].(map[string]any)
		data, _ := file["file_data"].(string)
		if !bytes.Equal(dataURLBytes(t, data, "application/pdf"), llmtest.PDF) || file["filename"] != "report.pdf" {
			t.Errorf("the PDF reached the model as %v", file)
		}
	})

	t.Run("errors", func(t *testing.T) {
		r, fake := newSQLite(t)
		fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Oslo"}`}}})
		run(t, r, "resp_errors")
		if ch := r.onlyChat("alice"); ch.Status != "requires_action" || len(fake.Requests()) != 1 {
			t.Fatalf("chat %s, %d model requests", ch.Status, len(fake.Requests()))
		}
	})
}

// nodeCheckResult checks that the model's i-th request ends with the
// result of call id, containing want, right after the assistant message
// that made the call.
func nodeCheckResult(t *testing.T, fake *llmtest.OpenAIChat, i int, id, want string) {
	t.Helper()
	msgs, _ := modelRequest(t, fake, i)
	n := len(msgs)
	if n < 2 || msgs[n-1].Role != "tool" || msgs[n-1].ToolCallID != id || msgs[n-2].Role != "assistant" ||
		len(msgs[n-2].ToolCalls) != 1 || msgs[n-2].ToolCalls[0].ID != id {
		t.Fatalf("model's request %d: %+v", i, msgs)
	}
	content, _ := json.Marshal(msgs[n-1].Content)
	if !strings.Contains(string(content), want) {
		t.Fatalf("model's request %d: result %s, want it to contain %q", i, content, want)
	}
}
