package facade_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// The fake's answers in the structured-output tests: prose the format
// refuses, then the JSON it asks for (in a code fence, which parley reads
// through).
const (
	proseAnswer  = "Ada Lovelace, who was 36."
	fencedAnswer = "```json\n{\"name\": \"Ada\", \"age\": 36}\n```"
	personJSON   = `{"name":"Ada","age":36}`
)

// checkPerson fails unless answer is exactly the person's JSON: valid
// against personSchema, with nothing around it.
func checkPerson(t *testing.T, answer string) {
	t.Helper()
	var p struct {
		Name string `json:"name"`
		Age  int    `json:"age"`
	}
	dec := json.NewDecoder(strings.NewReader(answer))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || dec.More() || p.Name != "Ada" || p.Age != 36 || answer != personJSON {
		t.Fatalf("answer %q is not the person's JSON (%v)", answer, err)
	}
}

// repairs counts the repair requests in a chat's history, and checks that
// its last assistant message holds the person as its output.
func repairs(t *testing.T, r *replica, id string) int {
	t.Helper()
	hist := r.history(id)
	n := 0
	for _, m := range hist {
		if chat.IsRepair(m) {
			n++
		}
	}
	if out := chat.LastOutput(hist); !bytes.Equal(out, []byte(personJSON)) {
		t.Fatalf("chat %s's last output %s, want %s", id, out, personJSON)
	}
	return n
}

// TestCompletionResponseFormat asks Chat Completions for JSON against a
// schema, streamed and not: the model's prose is repaired once, and the
// answer's content is the JSON alone (neither the prose nor the fence).
func TestCompletionResponseFormat(t *testing.T) {
	onBothStores(t, func(t *testing.T, r *replica, fake *llmtest.OpenAIChat) {
		c := r.client(r.token("alice"))
		params := openai.ChatCompletionNewParams{Model: "fake", ResponseFormat: schemaFormat("person", personSchema()),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who wrote the first program?")}}

		fake.Push(llmtest.Turn{Text: proseAnswer}, llmtest.Turn{Text: fencedAnswer})
		res, err := c.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		checkPerson(t, res.Choices[0].Message.Content)
		if res.Choices[0].FinishReason != "stop" {
			t.Fatalf("finish reason %q", res.Choices[0].FinishReason)
		}
		ch := r.onlyChat("alice")
		if ch.ResponseFormat == nil || ch.ResponseFormat.JSONSchema.Name != "person" {
			t.Fatalf("chat's format %+v", ch.ResponseFormat)
		}
		if n := repairs(t, r, ch.ID); n != 1 {
			t.Fatalf("%d repair requests, want 1", n)
		}
		// The model was asked for the format natively, and its second
		// request holds its prose and the repair request.
		var body struct {
			ResponseFormat struct {
				Type       string `json:"type"`
				JSONSchema struct {
					Name string `json:"name"`
				} `json:"json_schema"`
			} `json:"response_format"`
		}
		if err := json.Unmarshal(fake.Requests()[0].Body, &body); err != nil || body.ResponseFormat.Type != "json_schema" ||
			body.ResponseFormat.JSONSchema.Name != "person" {
			t.Fatalf("the model was asked for %+v (%v)", body.ResponseFormat, err)
		}
		if msgs, _ := modelRequest(t, fake, 1); !slices.Equal(roles(msgs), []string{"user", "assistant", "user"}) ||
			!strings.Contains(contentString(msgs[2].Content), "person") {
			t.Fatalf("model's second request: %+v", msgs)
		}

		fake.Push(llmtest.Turn{Text: proseAnswer, ChunkSize: 4}, llmtest.Turn{Text: fencedAnswer, ChunkSize: 4})
		st := c.Chat.Completions.NewStreaming(context.Background(), params)
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			if !acc.AddChunk(st.Current()) {
				t.Fatalf("the accumulator refused chunk %s", st.Current().RawJSON())
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		checkPerson(t, acc.Choices[0].Message.Content)
		if acc.Choices[0].FinishReason != "stop" {
			t.Fatalf("finish reason %q", acc.Choices[0].FinishReason)
		}
	})
}

// TestCompletionJSONObject checks that json_object asks for any JSON
// object: an answer that is an array is repaired.
func TestCompletionJSONObject(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(llmtest.Turn{Text: `["Ada", 36]`}, llmtest.Turn{Text: personJSON})
	res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "fake",
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &openai.ResponseFormatJSONObjectParam{}},
		Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who?")}})
	if err != nil {
		t.Fatal(err)
	}
	checkPerson(t, res.Choices[0].Message.Content)
	if n := repairs(t, r, r.onlyChat("alice").ID); n != 1 {
		t.Fatalf("%d repair requests, want 1", n)
	}
}

// TestResponsesTextFormat asks the Responses API for JSON against a schema
// (text.format), streamed and not: output_text is the JSON alone after one
// repair, and the response says its format. A continuation without
// text.format answers in free text, as at OpenAI; one with it in JSON.
func TestResponsesTextFormat(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	params := responses.ResponseNewParams{Model: "fake", Input: text("Who wrote the first program?"), Text: textFormat("person", personSchema())}

	fake.Push(llmtest.Turn{Text: proseAnswer}, llmtest.Turn{Text: fencedAnswer})
	res, err := c.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	checkPerson(t, res.OutputText())
	if len(res.Output) != 1 || res.Text.Format.Type != "json_schema" || res.Text.Format.Name != "person" || !res.Text.Format.Strict {
		t.Fatalf("response %s", res.RawJSON())
	}
	ch := r.onlyChat("alice")
	if n := repairs(t, r, ch.ID); n != 1 {
		t.Fatalf("%d repair requests, want 1", n)
	}

	// The next response, without text.format, is free text: no repair.
	fake.Push(llmtest.Turn{Text: "She was a mathematician."})
	res2, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "fake",
		Input: text("Tell me more"), PreviousResponseID: openai.String(res.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if res2.OutputText() != "She was a mathematician." || res2.Text.Format.Type != "text" {
		t.Fatalf("free-text continuation %s", res2.RawJSON())
	}
	// With text.format, the continuation's answer is JSON again.
	fake.Push(llmtest.Turn{Text: proseAnswer}, llmtest.Turn{Text: personJSON})
	res3, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "fake", Input: text("Again, as JSON"),
		PreviousResponseID: openai.String(res2.ID), Text: textFormat("person", personSchema())})
	if err != nil {
		t.Fatal(err)
	}
	checkPerson(t, res3.OutputText())
	if n := repairs(t, r, ch.ID); n != 2 {
		t.Fatalf("%d repair requests in the chat, want 2", n)
	}

	fake.Push(llmtest.Turn{Text: proseAnswer, ChunkSize: 4}, llmtest.Turn{Text: fencedAnswer, ChunkSize: 4})
	got := respStream(t, c, params)
	checkPerson(t, got.final.OutputText())
	checkPerson(t, got.acc.Snapshot().OutputText())
	if got.count["response.output_item.added"] != 1 || got.count["response.output_text.delta"] != 1 {
		t.Fatalf("events %v", got.count)
	}
}

// TestStructuredOutputInvalid checks that an answer still not valid after
// the repairs allowed is the run's failure, an OpenAI-shaped 500 whose code
// says why and which the SDKs are told not to retry (the same request would
// spend the same model calls again), and leaves the chat in error, from
// which a retry goes on.
func TestStructuredOutputInvalid(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(llmtest.Turn{Text: proseAnswer}, llmtest.Turn{Text: proseAnswer}, llmtest.Turn{Text: proseAnswer})
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "fake",
		ResponseFormat: schemaFormat("person", personSchema()),
		Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who?")}})
	expectError(t, err, http.StatusInternalServerError, "server_error", "", "structured_output_invalid")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.Response.Header.Get("x-should-retry") != "false" {
		t.Fatalf("error %v: want x-should-retry: false, so the SDKs do not run the model again", err)
	}
	ch := r.onlyChat("alice")
	if ch.Status != chat.Error || ch.LastError == nil || !ch.LastError.Retryable || len(fake.Requests()) != 3 {
		t.Fatalf("chat %s %+v after %d model requests", ch.Status, ch.LastError, len(fake.Requests()))
	}
}

// TestStructuredWithClientFunction checks that a client function call in
// a turn with a response format does not lose it: the call's answer shows
// the call alone (the text beside it is not the answer), and the request
// that sends its result gets the JSON alone, the turn's format enforced.
func TestStructuredWithClientFunction(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(llmtest.Turn{Text: "Let me check.", ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Paris"}`}}})
	params := openai.ChatCompletionNewParams{Model: "fake", ResponseFormat: schemaFormat("person", personSchema()),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who lived in Paris?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool()}}
	res, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	choice := res.Choices[0]
	if choice.FinishReason != "tool_calls" || choice.Message.Content != "" || len(choice.Message.ToolCalls) != 1 {
		t.Fatalf("first answer %s", res.RawJSON())
	}

	fake.Push(llmtest.Turn{Text: proseAnswer}, llmtest.Turn{Text: personJSON})
	params.Messages = append(params.Messages, choice.Message.ToParam(), openai.ToolMessage(`{"sky":"sunny"}`, "call_w"))
	res, err = c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	checkPerson(t, res.Choices[0].Message.Content)
	ch := r.onlyChat("alice") // the results continued the chat
	if n := repairs(t, r, ch.ID); n != 1 {
		t.Fatalf("%d repair requests, want 1", n)
	}
}
