package facade_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/facade"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

func TestResponsesErrors(t *testing.T) {
	r, fake := newSQLite(t)
	ctx := context.Background()
	c := r.client(r.token("alice"))
	tools := []responses.ToolUnionParam{weatherFunction()}

	// A bad key; an unknown model; an unknown previous response.
	bad := r.client("prl_not-a-token")
	_, err := bad.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("hi")})
	expectError(t, err, http.StatusUnauthorized, "authentication_error", "", "invalid_api_key")
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "nope", Input: text("hi")})
	expectError(t, err, http.StatusNotFound, "invalid_request_error", "model", "model_not_found")
	for _, id := range []string{"resp_nothing", "resp_0199d7a4-0000-7000-8000-000000000000_3", "chatcmpl-x-1"} {
		_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("hi"), PreviousResponseID: openai.String(id)})
		expectError(t, err, http.StatusNotFound, "invalid_request_error", "previous_response_id", "previous_response_not_found")
	}
	// A hosted tool; a function named like a server-side tool; an output
	// that answers no call of the input.
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("hi"),
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "tools[0].type", "")
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("hi"),
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction(serverTool, nil, false)}})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "tools[0].name", "")
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: callOutput("call_x", "1")})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "input[0].role", "")
	if n := len(r.chats("alice")); n != 0 || len(fake.Requests()) != 0 {
		t.Fatalf("refused requests left %d chats and %d model requests", n, len(fake.Requests()))
	}

	// A response that called get_weather: its continuation must answer
	// exactly that call.
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_w", Name: "get_weather", Args: `{"city":"Oslo"}`}}})
	res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("Weather in Oslo?"), Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	prev := openai.String(res.ID)
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", PreviousResponseID: prev, Input: callOutput("call_zz", "1")})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "input", "")
	if !strings.Contains(errMessage(err), "call_zz") || !strings.Contains(errMessage(err), "call_w") {
		t.Fatalf("the error names neither id: %v", err)
	}
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", PreviousResponseID: prev, Input: text("never mind")})
	expectError(t, err, http.StatusBadRequest, "invalid_request_error", "input", "")
	if !strings.Contains(errMessage(err), "call_w") {
		t.Fatalf("the error names no missing call: %v", err)
	}
	// Another owner's response is unknown to bob.
	bob := r.client(r.token("bob"))
	_, err = bob.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", PreviousResponseID: prev, Input: callOutput("call_w", "1")})
	expectError(t, err, http.StatusNotFound, "invalid_request_error", "previous_response_id", "previous_response_not_found")
	if ch := r.onlyChat("alice"); ch.Status != chat.RequiresAction || len(fake.Requests()) != 1 {
		t.Fatalf("chat %s after refused continuations, %d model requests", ch.Status, len(fake.Requests()))
	}
}

// errMessage is the message of an OpenAI-shaped error.
func errMessage(err error) string {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return apiErr.Message
	}
	return err.Error()
}

func TestResponsesContinueOnAnotherReplica(t *testing.T) {
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
	onA := a.client(tok)
	res, err := onA.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "fake", Input: text("Weather in Kyiv?"), Tools: []responses.ToolUnionParam{weatherFunction()}})
	if err != nil {
		t.Fatal(err)
	}
	if call := onlyCall(t, res, ""); call.CallID != "call_w" {
		t.Fatalf("first answer on A: %s", res.RawJSON())
	}
	id := a.onlyChat("alice").ID

	fake.Push(llmtest.Turn{Text: "Clear skies over Kyiv today.", ChunkSize: 4, Usage: llmtest.Usage{InputTokens: 7, OutputTokens: 5}})
	got := respStream(t, b.client(tok), responses.ResponseNewParams{Model: "fake", PreviousResponseID: openai.String(res.ID), Input: callOutput("call_w", "clear")})
	if got.final.OutputText() != "Clear skies over Kyiv today." || got.final.Usage.TotalTokens != 12 || !strings.HasPrefix(got.final.ID, "resp_"+id+"_") {
		t.Fatalf("answer on B: %s", got.final.RawJSON())
	}
	if got := b.onlyChat("alice"); got.ID != id || got.Status != chat.Waiting {
		t.Fatalf("chat %s (%s), want %s waiting", got.ID, got.Status, id)
	}
	msgs, _ := modelRequest(t, fake, 2)
	if got := strings.Join(roles(msgs), ","); got != "user,assistant,tool,assistant,tool" || msgs[1].ToolCalls[0].ID != "call_srv" {
		t.Fatalf("model's third request: %s", got)
	}
}

// TestConcurrentResponsesContinuationLoses checks that of two requests
// that answer the calls of one response at once, the second to submit
// gets the documented 409, whether the winner's run is still going or the
// chat waits for the winner's next calls by then (when its results answer
// calls no longer pending), as in Chat Completions.
func TestConcurrentResponsesContinuationLoses(t *testing.T) {
	for _, winnerDone := range []bool{false, true} {
		t.Run(map[bool]string{false: "winner running", true: "winner done"}[winnerDone], func(t *testing.T) {
			r, fake := newSQLite(t)
			ctx := context.Background()
			c := r.client(r.token("alice"))
			fake.Push(callOslo())
			first, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("Weather in Oslo?"),
				Tools: []responses.ToolUnionParam{weatherFunction()}})
			if err != nil {
				t.Fatal(err)
			}
			id := r.onlyChat("alice").ID
			answer := func(result string) responses.ResponseNewParams {
				return responses.ResponseNewParams{Model: "fake", PreviousResponseID: openai.String(first.ID), Input: callOutput("call_1", result)}
			}

			// The loser is held after it read the chat, before it submits.
			held, release := make(chan struct{}), make(chan struct{})
			once := true
			facade.HoldResume(t, func(string) {
				if once {
					once = false
					close(held)
					<-release
				}
			})
			lost := make(chan error, 1)
			go func() {
				_, err := c.Responses.New(ctx, answer("-5C"))
				lost <- err
			}()
			select {
			case <-held:
			case err := <-lost:
				t.Fatalf("the continuation was not held before it submitted; it ended with %v", err)
			}

			// The winner's run calls get_weather again, as call_2; unless
			// winnerDone, the loser submits while that model call is held.
			started, gate := make(chan struct{}), make(chan struct{})
			fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_2", Name: "get_weather", Args: `{"city":"Bergen"}`}}, Started: started, Gate: gate})
			if winnerDone {
				close(gate)
			}
			won := make(chan *responses.Response, 1)
			go func() {
				res, err := c.Responses.New(ctx, answer("-6C"))
				if err != nil {
					t.Error(err)
				}
				won <- res
			}()
			<-started
			var res *responses.Response
			if winnerDone {
				res = <-won
			}
			close(release)
			expectError(t, <-lost, http.StatusConflict, "conflict_error", "", "conversation_moved_on")
			if !winnerDone {
				close(gate)
				res = <-won
			}
			if res == nil || !strings.HasPrefix(res.ID, "resp_"+id+"_") {
				t.Fatalf("winner: %+v", res)
			}
			if call := onlyCall(t, res, ""); call.CallID != "call_2" {
				t.Fatalf("winner's call %s", call.CallID)
			}

			// The chat holds the winner's result only, and waits for the
			// winner's next answer.
			var results []string
			for _, m := range r.history(id) {
				for _, pt := range m.Parts {
					if pt.Type == chat.PartToolResult {
						results = append(results, string(pt.Output))
					}
				}
			}
			if got := strings.Join(results, ","); got != `"-6C"` {
				t.Fatalf("results in the chat: %s", got)
			}
			if got := r.onlyChat("alice"); got.Status != chat.RequiresAction {
				t.Fatalf("chat is %s", got.Status)
			}
		})
	}
}
