package facade_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestFacadeChatCompactsAndIsContinued: a conversation sent through the
// facade that nears the model's window is summarised before its step, and
// the request that answers the model's call still finds the chat.
func TestFacadeChatCompactsAndIsContinued(t *testing.T) {
	r, fake := newSQLite(t, func(d *api.Deps) { d.Config.Models[0].ContextWindow = 3000 })
	fake.SetContextWindow(3000)
	fake.Push(
		llmtest.Turn{Text: "SUMMARY: the user asked about the weather twice."},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Kyiv"}`}}},
		llmtest.Turn{Text: "Clear in Kyiv."},
	)
	params := askWeather("Kyiv")
	long := strings.Repeat("words ", 400) // about 600 tokens
	params.Messages = append([]openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("first " + long), openai.AssistantMessage("first answer " + long),
		openai.UserMessage("second " + long), openai.AssistantMessage("second answer " + long),
	}, params.Messages...)
	c := r.client(r.token("alice"))
	res, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices[0].Message.ToolCalls) != 1 || strings.Contains(res.Choices[0].Message.Content, "SUMMARY") {
		t.Fatalf("first answer %+v, want the call", res.Choices[0].Message)
	}
	// The summary is spent answering: its tokens count in the usage.
	if reqs := fake.Requests(); len(reqs) != 2 || res.Usage.PromptTokens != reqs[0].PromptTokens+reqs[1].PromptTokens {
		t.Fatalf("usage %+v over %d requests, want the summary's prompt tokens and the answer's", res.Usage, len(reqs))
	}
	id := r.onlyChat("alice").ID
	params = withCall(params, "call_w", `{"city":"Kyiv"}`, "clear")
	res, err = c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != "Clear in Kyiv." {
		t.Fatalf("second answer %+v", res.Choices[0].Message)
	}
	if got := r.onlyChat("alice"); got.ID != id {
		t.Fatalf("the continuation made chat %s, want %s", got.ID, id)
	}
	compactions := 0
	for _, m := range r.history(id) {
		if chat.IsCompaction(m) {
			compactions++
		}
	}
	if compactions != 1 || fake.MaxPromptTokens() > 3000 {
		t.Fatalf("%d compactions, largest request %d tokens; want 1 and none over 3000", compactions, fake.MaxPromptTokens())
	}
}
