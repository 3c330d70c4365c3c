package facade_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// askWeather is a conversation that asks for the weather, with the client
// function declared.
func askWeather(city string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in " + city + "?")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool()},
	}
}

// withCall is the conversation after the model called get_weather (id) and
// the client answered result.
func withCall(p openai.ChatCompletionNewParams, id, args, result string) openai.ChatCompletionNewParams {
	p.Messages = append(p.Messages,
		openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: args}}}},
		}},
		openai.ToolMessage(result, id))
	return p
}

func TestDisconnectedRunFinishesAndContinues(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	started, gate := make(chan struct{}), make(chan struct{})
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Oslo"}`}}, Started: started, Gate: gate})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Chat.Completions.New(ctx, askWeather("Oslo"))
		done <- err
	}()
	<-started // the model call is under way
	id := r.onlyChat("alice").ID
	sub, err := r.ps.Subscribe(context.Background(), events.ChatTopic(id))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	close(gate)
	for ended := false; !ended; {
		m := <-sub.C()
		var ev events.ChatEvent
		_ = json.Unmarshal(m.Payload, &ev)
		ended = ev.Kind == events.KindStatus && ev.Chat != nil && ev.Chat.Status == chat.RequiresAction
	}

	// The run went on without its client; the next request continues it.
	fake.Push(llmtest.Turn{Text: "Cold in Oslo."})
	res, err := c.Chat.Completions.New(context.Background(), withCall(askWeather("Oslo"), "call_w", `{"city":"Oslo"}`, "-5C"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != "Cold in Oslo." {
		t.Fatalf("answer %+v", res.Choices[0])
	}
	if got := r.onlyChat("alice"); got.ID != id || got.Status != chat.Waiting {
		t.Fatalf("chat %s (%s), want %s waiting", got.ID, got.Status, id)
	}
}

func TestUnknownResultsStartANewChat(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	// No chat waits for call_x: the request's history becomes a new chat's,
	// ending in the client's result, which the model answers.
	fake.Push(llmtest.Turn{Text: "Warm."})
	res, err := c.Chat.Completions.New(context.Background(), withCall(askWeather("Lima"), "call_x", `{"city":"Lima"}`, "25C"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != "Warm." {
		t.Fatalf("answer %+v", res.Choices[0])
	}
	msgs, _ := modelRequest(t, fake, 0)
	if got := strings.Join(roles(msgs), ","); got != "user,assistant,tool" {
		t.Fatalf("model got %s", got)
	}
	r.onlyChat("alice")
}

func TestContinueOnAnotherReplica(t *testing.T) {
	dsn := pgtest.Migrated(t)
	channel := "parley_test_" + strings.ToLower(rand.Text()[:10])
	fake := llmtest.NewOpenAIChat(t)
	stA, psA := pgtest.Replica(t, dsn, channel, testLog(t))
	stB, psB := pgtest.Replica(t, dsn, channel, testLog(t))
	a, b := serve(t, stA, psA, fake), serve(t, stB, psB, fake)
	a.runEngine() // only A runs chats: B's stream gets the deltas across
	tok := a.token("alice")

	fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_srv", Name: serverTool, Args: `{}`}}},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Kyiv"}`}}},
	)
	params := askWeather("Kyiv")
	onA := a.client(tok)
	res, err := onA.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	call := res.Choices[0].Message.ToolCalls
	if res.Choices[0].FinishReason != "tool_calls" || len(call) != 1 || call[0].ID != "call_w" {
		t.Fatalf("first answer on A: %+v", res.Choices[0])
	}
	id := a.onlyChat("alice").ID

	// The answer is held after its first text deltas: B's stream shows
	// them before the rest exists, so they crossed from A live.
	gate := make(chan struct{})
	fake.Push(llmtest.Turn{Text: "Clear skies over Kyiv today.", Usage: llmtest.Usage{InputTokens: 7, OutputTokens: 5}, Gate: gate, GateAfter: 3})
	params.Messages = append(params.Messages, res.Choices[0].Message.ToParam(), openai.ToolMessage("clear", "call_w"))
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	onB := b.client(tok)
	st := onB.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		if !acc.AddChunk(st.Current()) {
			t.Fatalf("the accumulator refused %s", st.Current().RawJSON())
		}
		if gate != nil && acc.Choices[0].Message.Content != "" {
			close(gate)
			gate = nil
		}
	}
	if err := st.Err(); err != nil || gate != nil {
		t.Fatalf("stream on B: %v (gate still closed: %v)", err, gate != nil)
	}
	if acc.Choices[0].Message.Content != "Clear skies over Kyiv today." || acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens != 12 {
		t.Fatalf("answer on B: %+v, usage %+v", acc.Choices[0], acc.Usage)
	}
	if got := b.onlyChat("alice"); got.ID != id || got.Status != chat.Waiting {
		t.Fatalf("chat %s (%s), want %s waiting", got.ID, got.Status, id)
	}
	msgs, _ := modelRequest(t, fake, 2)
	if got := strings.Join(roles(msgs), ","); got != "user,assistant,tool,assistant,tool" || msgs[1].ToolCalls[0].ID != "call_srv" {
		t.Fatalf("model's third request: %s", got)
	}
}
