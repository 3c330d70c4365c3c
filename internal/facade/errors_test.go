package facade_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// expectError checks that err is the SDK's *openai.Error with this status,
// type, param and (if not "") code.
func expectError(t *testing.T, err error, status int, typ, param, code string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v (%T), want *openai.Error", err, err)
	}
	if apiErr.StatusCode != status || apiErr.Type != typ || apiErr.Param != param || (code != "" && apiErr.Code != code) {
		t.Fatalf("error %d %s param %q code %q: %s; want %d %s param %q code %q",
			apiErr.StatusCode, apiErr.Type, apiErr.Param, apiErr.Code, apiErr.Message, status, typ, param, code)
	}
}

func TestErrors(t *testing.T) {
	r, fake := newSQLite(t)
	ctx := context.Background()
	tok := r.token("alice")
	hi := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}

	bad := r.client("pt_nope.nope")
	_, err := bad.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake", Messages: hi})
	expectError(t, err, http.StatusUnauthorized, "authentication_error", "", "invalid_api_key")
	_, err = bad.Models.List(ctx)
	expectError(t, err, http.StatusUnauthorized, "authentication_error", "", "invalid_api_key")

	c := r.client(tok)
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-unknown", Messages: hi})
	expectError(t, err, http.StatusNotFound, "invalid_request_error", "model", "model_not_found")

	// A tool message that answers no call.
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.ToolMessage("x", "call_1")}})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "messages[0].role", "")
	// An assistant call without its result, then a user message.
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("a"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: "{}"}},
			}}}},
			openai.UserMessage("b"),
		}})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "messages", "")
	// Nothing to answer: the last message is the assistant's.
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a"), openai.AssistantMessage("b")}})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "messages", "")

	// A function named like a server-side tool.
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake", Messages: hi,
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: serverTool})}})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "tools[0].function.name", "")
	if n := len(r.chats("alice")); n != 0 || len(fake.Requests()) != 0 {
		t.Fatalf("refused requests left %d chats and %d model requests", n, len(fake.Requests()))
	}

	// n > 1 is refused; the unknown route answers in OpenAI's shape too.
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fake", Messages: hi, N: openai.Int(2)})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "n", "")
	_, err = c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "fake", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	expectError(t, err, http.StatusNotFound, "invalid_request_error", "", "unknown_url")
}

func TestModels(t *testing.T) {
	r, _ := newSQLite(t)
	c := r.client(r.token("alice"))
	page, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if page.Object != "list" || len(page.Data) != 1 || page.Data[0].ID != "fake" || page.Data[0].Object != "model" || page.Data[0].OwnedBy != "parley" {
		t.Fatalf("models %+v", page)
	}
	m, err := c.Models.Get(context.Background(), "fake")
	if err != nil || m.ID != "fake" {
		t.Fatalf("model %+v, %v", m, err)
	}
	_, err = c.Models.Get(context.Background(), "nope")
	expectError(t, err, http.StatusNotFound, "invalid_request_error", "model", "model_not_found")
	if !strings.HasPrefix(r.url, "http://") {
		t.Fatal(r.url)
	}
}

func TestRunFailure(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	hi := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}

	fake.Push(llmtest.Turn{Status: http.StatusBadRequest, ErrorMessage: "the provider refuses"})
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "fake", Messages: hi})
	expectError(t, err, http.StatusInternalServerError, "server_error", "", "run_failed")

	// Streamed, the failure is the stream's last event, which the SDK reports.
	fake.Push(llmtest.Turn{Status: http.StatusBadRequest, ErrorMessage: "the provider refuses"})
	st := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "fake", Messages: hi})
	for st.Next() {
		if ch := st.Current(); len(ch.Choices) > 0 && ch.Choices[0].FinishReason != "" {
			t.Fatalf("a failed run has a finish reason: %s", ch.RawJSON())
		}
	}
	if err := st.Err(); err == nil || !strings.Contains(err.Error(), "run_failed") {
		t.Fatalf("stream error %v", err)
	}
	// The provider's rate limit, once parley's retries are spent, is a 429.
	for range 3 {
		fake.Push(llmtest.Turn{Status: http.StatusTooManyRequests, ErrorMessage: "slow down"})
	}
	_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "fake", Messages: hi})
	expectError(t, err, http.StatusTooManyRequests, "requests", "", "rate_limit_exceeded")

	for _, ch := range r.chats("alice") {
		if ch.Status != chat.Error {
			t.Fatalf("chat %s is %s", ch.ID, ch.Status)
		}
	}
}

func TestToolChoiceNoneOffersNoTool(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(llmtest.Turn{Text: "No tools."})
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:      "fake",
		Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		Tools:      []openai.ChatCompletionToolUnionParam{weatherTool()},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, names := modelRequest(t, fake, 0); len(names) != 0 {
		t.Fatalf("the model was offered %v", names)
	}
}
