package facade_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// weatherFunction is the client function in the Responses shape.
func weatherFunction() responses.ToolUnionParam {
	t := responses.ToolParamOfFunction("get_weather",
		map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)
	t.OfFunction.Description = openai.String("the weather in a city")
	return t
}

// text is a string input.
func text(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

// callOutput is the input that answers call id with output.
func callOutput(id, output string) responses.ResponseNewParamsInputUnion {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openai.String(id)
	return responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{item}}
}

// onlyCall checks that the response's output is (text, then) exactly one
// function call, and returns it.
func onlyCall(t *testing.T, res *responses.Response, wantText string) responses.ResponseFunctionToolCall {
	t.Helper()
	var calls []responses.ResponseFunctionToolCall
	for _, it := range res.Output {
		switch it.Type {
		case "function_call":
			calls = append(calls, it.AsFunctionCall())
		case "message":
		default:
			t.Fatalf("an output item of type %s: %s", it.Type, it.RawJSON())
		}
	}
	if len(calls) != 1 || res.OutputText() != wantText || res.Status != "completed" {
		t.Fatalf("response %s", res.RawJSON())
	}
	return calls[0]
}

func TestResponsesText(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(llmtest.Turn{Text: "Hello there.", Usage: llmtest.Usage{InputTokens: 10, OutputTokens: 4}})
	res, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "fake", Input: text("Say hello"), Instructions: openai.String("Be brief."),
		Temperature: openai.Float(0.2), MaxOutputTokens: openai.Int(50), Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := r.onlyChat("alice")
	if res.Object != "response" || !strings.HasPrefix(res.ID, "resp_"+ch.ID+"_") || res.Status != "completed" || res.Model != "fake" || res.CreatedAt == 0 {
		t.Fatalf("response %s", res.RawJSON())
	}
	if res.OutputText() != "Hello there." || len(res.Output) != 1 || res.Output[0].Type != "message" || res.Output[0].Role != "assistant" ||
		res.Output[0].Status != "completed" || res.Output[0].ID == "" {
		t.Fatalf("output %s", res.RawJSON())
	}
	if res.Usage.InputTokens != 10 || res.Usage.OutputTokens != 4 || res.Usage.TotalTokens != 14 {
		t.Fatalf("usage %+v", res.Usage)
	}
	if ch.Labels["api"] != "openai-responses" || ch.SystemPrompt != "Be brief." || ch.Status != chat.Waiting {
		t.Fatalf("chat %+v", ch)
	}

	// previous_response_id continues the chat with the next user message.
	fake.Push(llmtest.Turn{Text: "Bye."})
	res2, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "fake", Input: text("Now bye"), PreviousResponseID: openai.String(res.ID),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res2.OutputText() != "Bye." || res2.ID == res.ID || res2.PreviousResponseID != res.ID {
		t.Fatalf("second %s", res2.RawJSON())
	}
	if got := r.onlyChat("alice"); got.ID != ch.ID {
		t.Fatalf("continued chat %s, want %s", got.ID, ch.ID)
	}
	if msgs, _ := modelRequest(t, fake, 1); !slices.Equal(roles(msgs), []string{"system", "user", "assistant", "user"}) {
		t.Fatalf("model got %v", roles(msgs))
	}
}

func TestResponsesStreamingText(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(llmtest.Turn{Text: "A short story, told in parts.", ChunkSize: 4, Usage: llmtest.Usage{InputTokens: 3, OutputTokens: 7}})
	items := []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMessage("Be terse.", responses.EasyInputMessageRoleDeveloper),
		responses.ResponseInputItemParamOfMessage("Tell a story", responses.EasyInputMessageRoleUser),
	}
	got := respStream(t, c, responses.ResponseNewParams{Model: "fake", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}})
	if got.final.OutputText() != "A short story, told in parts." || got.final.Usage.TotalTokens != 10 || got.acc.Snapshot().OutputText() != got.final.OutputText() {
		t.Fatalf("final %s", got.final.RawJSON())
	}
	if got.count["response.output_text.delta"] < 2 || got.count["response.output_item.added"] != 1 || got.count["response.content_part.added"] != 1 {
		t.Fatalf("events %v", got.count)
	}
	if ch := r.onlyChat("alice"); ch.SystemPrompt != "Be terse." || !strings.HasPrefix(got.final.ID, "resp_"+ch.ID+"_") {
		t.Fatalf("chat %+v, response %s", ch, got.final.ID)
	}
}

func TestResponsesServerTool(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	srv := llmtest.Turn{Text: "Looking it up.", ToolCalls: []llmtest.ToolCall{{ID: "call_srv", Name: serverTool, Args: `{"q":"meaning"}`}},
		Usage: llmtest.Usage{InputTokens: 20, OutputTokens: 5}}
	answer := llmtest.Turn{Text: "It is 42.", Usage: llmtest.Usage{InputTokens: 30, OutputTokens: 8}, ChunkSize: 3}
	fake.Push(srv, answer, srv, answer)
	params := responses.ResponseNewParams{Model: "fake", Input: text("What is the answer?"), Tools: []responses.ToolUnionParam{weatherFunction()}}
	res, err := c.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.OutputText() != "Looking it up.\n\nIt is 42." || len(res.Output) != 1 || res.Usage.TotalTokens != 63 {
		t.Fatalf("response %s", res.RawJSON())
	}
	got := respStream(t, c, params)
	if got.final.OutputText() != "Looking it up.\n\nIt is 42." || len(got.final.Output) != 1 || got.final.Usage.TotalTokens != 63 {
		t.Fatalf("streamed %s", got.final.RawJSON())
	}
	for _, raw := range got.raw {
		if strings.Contains(raw, "call_srv") || strings.Contains(raw, serverTool) {
			t.Fatalf("a server-side call reached the client: %s", raw)
		}
	}
	msgs, names := modelRequest(t, fake, 1)
	if !slices.Equal(roles(msgs), []string{"user", "assistant", "tool"}) || !strings.Contains(contentString(msgs[2].Content), lookupResult) {
		t.Fatalf("model's second request: %+v", msgs)
	}
	if !slices.Contains(names, serverTool) || !slices.Contains(names, "get_weather") {
		t.Fatalf("model offered %v", names)
	}
}

func TestResponsesFunctionRoundTrip(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_srv", Name: serverTool, Args: `{}`}}, Usage: llmtest.Usage{InputTokens: 1, OutputTokens: 1}},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Paris"}`}}, Usage: llmtest.Usage{InputTokens: 2, OutputTokens: 2}},
	)
	res, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "fake", Input: text("Weather in Paris?"), Tools: []responses.ToolUnionParam{weatherFunction()},
	})
	if err != nil {
		t.Fatal(err)
	}
	call := onlyCall(t, res, "")
	if call.CallID != "call_w" || call.Name != "get_weather" || call.Arguments != `{"city":"Paris"}` || call.ID == "" || res.Usage.TotalTokens != 6 ||
		len(res.Tools) != 1 || res.Tools[0].Name != "get_weather" {
		t.Fatalf("call %s", res.RawJSON())
	}
	ch := r.onlyChat("alice")
	if ch.Status != chat.RequiresAction {
		t.Fatalf("chat is %s", ch.Status)
	}

	fake.Push(llmtest.Turn{Text: "Sunny in Paris."})
	next := responses.ResponseNewParams{Model: "fake", PreviousResponseID: openai.String(res.ID), Input: callOutput("call_w", `{"sky":"sunny"}`)}
	res2, err := c.Responses.New(context.Background(), next)
	if err != nil {
		t.Fatal(err)
	}
	if res2.OutputText() != "Sunny in Paris." || len(res2.Output) != 1 {
		t.Fatalf("second %s", res2.RawJSON())
	}
	if again := r.onlyChat("alice"); again.ID != ch.ID || again.Status != chat.Waiting {
		t.Fatalf("continued chat %s (%s), want %s", again.ID, again.Status, ch.ID)
	}
	// The model sees the hidden server-side step, then the client's call
	// and result.
	msgs, _ := modelRequest(t, fake, 2)
	if !slices.Equal(roles(msgs), []string{"user", "assistant", "tool", "assistant", "tool"}) ||
		msgs[1].ToolCalls[0].ID != "call_srv" || msgs[3].ToolCalls[0].ID != "call_w" || !strings.Contains(contentString(msgs[4].Content), "sunny") {
		t.Fatalf("model's third request: %+v", msgs)
	}
	// The same response continued again: its calls were answered.
	_, err = c.Responses.New(context.Background(), next)
	expectError(t, err, 409, "conflict_error", "", "conversation_moved_on")
}

func TestResponsesMixedStepStreamed(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	fake.Push(llmtest.Turn{Text: "Checking.", ToolCalls: []llmtest.ToolCall{
		{ID: "call_srv", Name: serverTool, Args: `{"q":"x"}`},
		{ID: "call_w", Name: "get_weather", Args: `{"city":"Rome"}`},
	}, ChunkSize: 3})
	got := respStream(t, c, responses.ResponseNewParams{Model: "fake", Input: text("Weather in Rome?"), Tools: []responses.ToolUnionParam{weatherFunction()}})
	call := onlyCall(t, &got.final, "Checking.")
	if call.CallID != "call_w" || call.Arguments != `{"city":"Rome"}` || got.final.Output[0].Type != "message" {
		t.Fatalf("final %s", got.final.RawJSON())
	}
	if got.count["response.function_call_arguments.delta"] < 2 || got.count["response.function_call_arguments.done"] != 1 {
		t.Fatalf("events %v", got.count)
	}
	snap := got.acc.Snapshot()
	if len(snap.Output) != 2 || snap.Output[1].CallID != "call_w" || snap.Output[1].Arguments != `{"city":"Rome"}` {
		t.Fatalf("accumulated %+v", snap)
	}

	fake.Push(llmtest.Turn{Text: "Rainy in Rome.", ChunkSize: 2})
	got = respStream(t, c, responses.ResponseNewParams{Model: "fake", PreviousResponseID: openai.String(got.final.ID), Input: callOutput("call_w", "rain")})
	if got.final.OutputText() != "Rainy in Rome." {
		t.Fatalf("second %s", got.final.RawJSON())
	}
	r.onlyChat("alice")
	results := map[string]bool{}
	msgs, _ := modelRequest(t, fake, 1)
	for _, m := range msgs {
		if m.Role == "tool" {
			results[m.ToolCallID] = true
		}
	}
	if !results["call_srv"] || !results["call_w"] {
		t.Fatalf("results the model got: %v", results)
	}
}

// streamed is what a Responses stream brought.
type streamed struct {
	final responses.Response
	acc   *responses.ResponseAccumulator
	count map[string]int
	raw   []string
}

// respStream sends a streaming request, checks its events (one
// lifecycle, sequence numbers from 0 up by one, items and content parts
// added before their deltas, the output item ids and indexes consistent)
// and feeds them to the SDK's accumulator.
func respStream(t *testing.T, c openai.Client, params responses.ResponseNewParams) streamed {
	t.Helper()
	st := c.Responses.NewStreaming(context.Background(), params)
	got := streamed{acc: &responses.ResponseAccumulator{}, count: map[string]int{}}
	items := map[int64]string{} // output index -> item id, once added
	parts := map[string]bool{}  // item ids with a content part added
	for st.Next() {
		ev := st.Current()
		raw := ev.RawJSON()
		if ev.SequenceNumber != int64(len(got.raw)) {
			t.Fatalf("event %d has sequence number %d: %s", len(got.raw), ev.SequenceNumber, raw)
		}
		if len(got.raw) == 0 && ev.Type != "response.created" || got.count["response.completed"] > 0 {
			t.Fatalf("event %d out of lifecycle: %s", len(got.raw), raw)
		}
		got.raw = append(got.raw, raw)
		got.count[ev.Type]++
		switch ev.Type {
		case "response.output_item.added":
			if _, dup := items[ev.OutputIndex]; dup || ev.OutputIndex != int64(len(items)) {
				t.Fatalf("item added at %d after %d items: %s", ev.OutputIndex, len(items), raw)
			}
			items[ev.OutputIndex] = ev.Item.ID
		case "response.content_part.added":
			parts[ev.ItemID] = true
		case "response.output_text.delta", "response.output_text.done", "response.content_part.done":
			if items[ev.OutputIndex] != ev.ItemID || !parts[ev.ItemID] {
				t.Fatalf("text of an item or part not added: %s", raw)
			}
		case "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done":
			if items[ev.OutputIndex] == "" || (ev.Type != "response.output_item.done" && items[ev.OutputIndex] != ev.ItemID) {
				t.Fatalf("an event of an item not added: %s", raw)
			}
		case "response.completed":
			got.final = ev.Response
		}
		var sev responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(raw), &sev); err != nil {
			t.Fatal(err)
		}
		if err := got.acc.AddEvent(sev); err != nil {
			t.Fatalf("the accumulator refused %s: %v", raw, err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if got.count["response.created"] != 1 || got.count["response.in_progress"] != 1 || got.count["response.completed"] != 1 ||
		got.count["response.output_item.added"] != got.count["response.output_item.done"] || len(got.final.Output) != len(items) {
		t.Fatalf("events %v, %d items; final %s", got.count, len(items), got.final.RawJSON())
	}
	for i, it := range got.final.Output {
		if it.ID != items[int64(i)] {
			t.Fatalf("final item %d is %s, streamed as %s", i, it.ID, items[int64(i)])
		}
	}
	return got
}
