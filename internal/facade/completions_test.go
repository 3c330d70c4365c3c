package facade_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

func TestTextCompletion(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(llmtest.Turn{Text: "Hello there, friend.", Usage: llmtest.Usage{InputTokens: 10, OutputTokens: 4}})

	res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Say hello")},
		User:     openai.String("user-7"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := r.onlyChat("alice")
	if res.Object != "chat.completion" || !strings.HasPrefix(res.ID, "chatcmpl-"+ch.ID+"-") || res.Model != "fake" || res.Created == 0 {
		t.Fatalf("completion %s %q %s %d", res.Object, res.ID, res.Model, res.Created)
	}
	if len(res.Choices) != 1 || res.Choices[0].Message.Content != "Hello there, friend." || res.Choices[0].FinishReason != "stop" ||
		len(res.Choices[0].Message.ToolCalls) != 0 || res.Choices[0].Message.Role != "assistant" {
		t.Fatalf("choices %+v", res.Choices)
	}
	if res.Usage.PromptTokens != 10 || res.Usage.CompletionTokens != 4 || res.Usage.TotalTokens != 14 {
		t.Fatalf("usage %+v", res.Usage)
	}
	if ch.Labels["api"] != "openai-chat" || ch.Labels["user"] != "user-7" || ch.SystemPrompt != "Be brief." || ch.Status != chat.Waiting {
		t.Fatalf("chat %+v", ch)
	}
	msgs, _ := modelRequest(t, fake, 0)
	if !slices.Equal(roles(msgs), []string{"system", "user"}) {
		t.Fatalf("model got %v", roles(msgs))
	}

	// A later turn with the history in the request starts a new chat with
	// that history: Chat Completions is stateless.
	fake.Push(llmtest.Turn{Text: "Bye."})
	res2, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Say hello"), res.Choices[0].Message.ToParam(), openai.UserMessage("Now bye"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Choices[0].Message.Content != "Bye." || len(r.chats("alice")) != 2 {
		t.Fatalf("second: %+v, %d chats", res2.Choices[0].Message, len(r.chats("alice")))
	}
	if msgs, _ := modelRequest(t, fake, 1); !slices.Equal(roles(msgs), []string{"user", "assistant", "user"}) {
		t.Fatalf("model got %v", roles(msgs))
	}
}

func TestStreamingWithServerTool(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_srv", Name: serverTool, Args: `{"q":"meaning"}`}}, Usage: llmtest.Usage{InputTokens: 20, OutputTokens: 5}},
		llmtest.Turn{Text: "The answer is 42, as looked up.", Usage: llmtest.Usage{InputTokens: 30, OutputTokens: 8}},
	)
	st := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "fake",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the answer?")},
		Tools:         []openai.ChatCompletionToolUnionParam{weatherTool()},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	var chunks, finishes, textChunks int
	for st.Next() {
		ch := st.Current()
		if !acc.AddChunk(ch) {
			t.Fatalf("the accumulator refused chunk %s", ch.RawJSON())
		}
		chunks++
		for _, choice := range ch.Choices {
			if choice.FinishReason != "" {
				finishes++
			}
			if len(choice.Delta.ToolCalls) > 0 {
				t.Fatalf("a tool call delta reached the client: %s", ch.RawJSON())
			}
			if choice.Delta.Content != "" {
				textChunks++
			}
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if finishes != 1 || textChunks < 2 {
		t.Fatalf("%d chunks: %d with a finish reason, %d with text", chunks, finishes, textChunks)
	}
	got := acc.Choices[0]
	if got.Message.Content != "The answer is 42, as looked up." || got.FinishReason != "stop" || len(got.Message.ToolCalls) != 0 {
		t.Fatalf("accumulated %+v", got)
	}
	if acc.Usage.PromptTokens != 50 || acc.Usage.CompletionTokens != 13 || acc.Usage.TotalTokens != 63 {
		t.Fatalf("usage %+v", acc.Usage)
	}
	// The model's second request carries the server-side call and its result.
	msgs, names := modelRequest(t, fake, 1)
	if !slices.Equal(roles(msgs), []string{"user", "assistant", "tool"}) || msgs[2].ToolCallID != "call_srv" ||
		!strings.Contains(contentString(msgs[2].Content), lookupResult) {
		t.Fatalf("model's second request: %+v", msgs)
	}
	if !slices.Contains(names, serverTool) || !slices.Contains(names, "get_weather") {
		t.Fatalf("model offered %v", names)
	}
}

// contentString is a message's content as text.
func contentString(c any) string {
	if s, ok := c.(string); ok {
		return s
	}
	return ""
}

func TestClientFunctionRoundTrip(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_srv", Name: serverTool, Args: `{}`}}, Usage: llmtest.Usage{InputTokens: 1, OutputTokens: 1}},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Paris"}`}}, Usage: llmtest.Usage{InputTokens: 2, OutputTokens: 2}},
	)
	params := openai.ChatCompletionNewParams{
		Model:    "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool()},
	}
	res, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	choice := res.Choices[0]
	if choice.FinishReason != "tool_calls" || len(choice.Message.ToolCalls) != 1 || res.Usage.TotalTokens != 6 {
		t.Fatalf("first answer %+v, usage %+v", choice, res.Usage)
	}
	call := choice.Message.ToolCalls[0]
	if call.ID != "call_w" || call.Type != "function" || call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("call %+v", call)
	}
	ch := r.onlyChat("alice")
	if ch.Status != chat.RequiresAction {
		t.Fatalf("chat is %s", ch.Status)
	}

	fake.Push(llmtest.Turn{Text: "Sunny in Paris.", Usage: llmtest.Usage{InputTokens: 3, OutputTokens: 3}})
	params.Messages = append(params.Messages, choice.Message.ToParam(), openai.ToolMessage(`{"sky":"sunny"}`, call.ID))
	res, err = c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != "Sunny in Paris." || res.Choices[0].FinishReason != "stop" || res.Usage.TotalTokens != 6 {
		t.Fatalf("second answer %+v, usage %+v", res.Choices[0], res.Usage)
	}
	if again := r.onlyChat("alice"); again.ID != ch.ID || again.Status != chat.Waiting {
		t.Fatalf("continued chat %s (%s), want %s", again.ID, again.Status, ch.ID)
	}
	// The model sees the hidden server-side step, then the client's call
	// and result.
	msgs, _ := modelRequest(t, fake, 2)
	if !slices.Equal(roles(msgs), []string{"user", "assistant", "tool", "assistant", "tool"}) ||
		msgs[1].ToolCalls[0].ID != "call_srv" || msgs[2].ToolCallID != "call_srv" ||
		msgs[3].ToolCalls[0].ID != "call_w" || msgs[4].ToolCallID != "call_w" || !strings.Contains(contentString(msgs[4].Content), "sunny") {
		t.Fatalf("model's third request: %+v", msgs)
	}
}

func TestMixedStepStreamed(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(llmtest.Turn{Text: "Checking.", ToolCalls: []llmtest.ToolCall{
		{ID: "call_srv", Name: serverTool, Args: `{"q":"x"}`},
		{ID: "call_w", Name: "get_weather", Args: `{"city":"Rome"}`},
	}, ChunkSize: 3})
	params := openai.ChatCompletionNewParams{
		Model:    "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Rome?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool()},
	}
	acc := stream(t, c, params)
	got := acc.Choices[0]
	if got.FinishReason != "tool_calls" || got.Message.Content != "Checking." || len(got.Message.ToolCalls) != 1 {
		t.Fatalf("accumulated %+v", got)
	}
	call := got.Message.ToolCalls[0]
	if call.ID != "call_w" || call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Rome"}` {
		t.Fatalf("call %+v", call)
	}

	fake.Push(llmtest.Turn{Text: "Rainy in Rome."})
	params.Messages = append(params.Messages, got.Message.ToParam(), openai.ToolMessage("rain", call.ID))
	acc = stream(t, c, params)
	if acc.Choices[0].Message.Content != "Rainy in Rome." || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("second %+v", acc.Choices[0])
	}
	r.onlyChat("alice")
	msgs, _ := modelRequest(t, fake, 1)
	if !slices.Equal(roles(msgs), []string{"user", "assistant", "tool", "tool"}) && !slices.Equal(roles(msgs), []string{"user", "assistant", "tool"}) {
		t.Fatalf("model's second request: %v", roles(msgs))
	}
	results := map[string]bool{}
	for _, m := range msgs {
		if m.Role == "tool" {
			results[m.ToolCallID] = true
		}
	}
	if !results["call_srv"] || !results["call_w"] {
		t.Fatalf("results the model got: %v", results)
	}
}

// stream sends a streaming request and accumulates it, checking that it
// ends with exactly one finish reason.
func stream(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams) openai.ChatCompletionAccumulator {
	t.Helper()
	st := c.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	finishes := 0
	for st.Next() {
		ch := st.Current()
		if !acc.AddChunk(ch) {
			t.Fatalf("the accumulator refused chunk %s", ch.RawJSON())
		}
		for _, choice := range ch.Choices {
			if choice.FinishReason != "" {
				finishes++
			}
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if finishes != 1 {
		t.Fatalf("%d chunks with a finish reason", finishes)
	}
	return acc
}
