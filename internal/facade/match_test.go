package facade_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/facade"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// chatOf is the id of the parley chat a completion came from: its id
// (chatcmpl-<chat id>-<n>) names it.
func chatOf(t *testing.T, res *openai.ChatCompletion) string {
	t.Helper()
	rest, ok := strings.CutPrefix(res.ID, "chatcmpl-")
	i := strings.LastIndexByte(rest, '-')
	if !ok || i < 0 {
		t.Fatalf("completion id %q", res.ID)
	}
	return rest[:i]
}

// callOslo is the model's turn that calls get_weather for Oslo as call_1:
// every conversation of these tests waits for the very same call.
func callOslo() llmtest.Turn {
	return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "get_weather", Args: `{"city":"Oslo"}`}}}
}

// TestContinuationFindsItsConversation checks that tool results resume
// the chat of their own conversation, though others wait for a call with
// the same id, name and arguments: conversations told apart by their
// messages, or by user alone, are never mixed, and two that nothing tells
// apart are neither resumed: the request starts a new chat.
func TestContinuationFindsItsConversation(t *testing.T) {
	r, fake := newSQLite(t)
	ctx := context.Background()
	ask := func(c openai.Client, p openai.ChatCompletionNewParams) string {
		t.Helper()
		fake.Push(callOslo())
		res, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("answer %+v", res.Choices[0])
		}
		return chatOf(t, res)
	}
	answer := func(c openai.Client, p openai.ChatCompletionNewParams, result string) string {
		t.Helper()
		fake.Push(llmtest.Turn{Text: "It is " + result + "."})
		res, err := c.Chat.Completions.New(ctx, withCall(p, "call_1", `{"city":"Oslo"}`, result))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Choices[0].Message.Content; got != "It is "+result+"." {
			t.Fatalf("answer %q", got)
		}
		return chatOf(t, res)
	}
	status := func(id string) chat.Status {
		t.Helper()
		c, err := r.st.GetChat(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c.Status
	}

	t.Run("different messages", func(t *testing.T) {
		c := r.client(r.token("alice"))
		pA, pB := askWeather("Oslo"), askWeather("Oslo")
		pB.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Is it cold in Oslo?")}
		a, b := ask(c, pA), ask(c, pB) // b is the newer
		if got := answer(c, pA, "-5C"); got != a {
			t.Fatalf("A's results went to chat %s, want A's %s (B is %s)", got, a, b)
		}
		if s := status(b); s != chat.RequiresAction {
			t.Fatalf("B is %s, want still requires_action", s)
		}
		if got := answer(c, pB, "-7C"); got != b {
			t.Fatalf("B's results went to chat %s, want %s", got, b)
		}
		if n := len(r.chats("alice")); n != 2 {
			t.Fatalf("%d chats, want 2", n)
		}
	})

	t.Run("different user", func(t *testing.T) {
		c := r.client(r.token("bob"))
		pA, pB := askWeather("Oslo"), askWeather("Oslo")
		pA.User, pB.User = openai.String("ann"), openai.String("ben")
		a, b := ask(c, pA), ask(c, pB)
		if got := answer(c, pA, "-5C"); got != a {
			t.Fatalf("ann's results went to chat %s, want hers %s (ben's is %s)", got, a, b)
		}
		if got := answer(c, pB, "-7C"); got != b {
			t.Fatalf("ben's results went to chat %s, want his %s", got, b)
		}
	})

	t.Run("nothing tells them apart", func(t *testing.T) {
		c := r.client(r.token("carol"))
		p := askWeather("Oslo")
		p.User = openai.String("cy")
		a, b := ask(c, p), ask(c, p)
		got := answer(c, p, "-5C")
		if got == a || got == b {
			t.Fatalf("the results resumed %s, one of two alike chats (%s, %s): want a new chat", got, a, b)
		}
		if sa, sb := status(a), status(b); sa != chat.RequiresAction || sb != chat.RequiresAction {
			t.Fatalf("the alike chats are %s and %s, want both still requires_action", sa, sb)
		}
		msgs, _ := modelRequest(t, fake, len(fake.Requests())-1)
		if got := strings.Join(roles(msgs), ","); got != "user,assistant,tool" {
			t.Fatalf("the new chat's model call got %s", got)
		}
	})
}

// TestConcurrentContinuationLoses checks that of two requests that answer
// the calls of one chat at once, the second to submit gets the documented
// 409, whether the winner's run is still going or waits for its next calls
// by then.
func TestConcurrentContinuationLoses(t *testing.T) {
	for _, winnerDone := range []bool{false, true} {
		t.Run(map[bool]string{false: "winner running", true: "winner done"}[winnerDone], func(t *testing.T) {
			r, fake := newSQLite(t)
			ctx := context.Background()
			c := r.client(r.token("alice"))
			p := askWeather("Oslo")
			fake.Push(callOslo())
			if _, err := c.Chat.Completions.New(ctx, p); err != nil {
				t.Fatal(err)
			}
			id := r.onlyChat("alice").ID

			// The loser is held after it matched the chat, before it submits.
			held, release := make(chan struct{}), make(chan struct{})
			first := true
			facade.HoldResume(t, func(string) {
				if first {
					first = false
					close(held)
					<-release
				}
			})
			lost := make(chan error, 1)
			go func() {
				_, err := c.Chat.Completions.New(ctx, withCall(p, "call_1", `{"city":"Oslo"}`, "-5C"))
				lost <- err
			}()
			<-held

			// The winner's run calls get_weather again, as call_2; unless
			// winnerDone, the loser submits while that model call is held.
			started, gate := make(chan struct{}), make(chan struct{})
			turn := llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_2", Name: "get_weather", Args: `{"city":"Bergen"}`}}, Started: started, Gate: gate}
			if winnerDone {
				close(gate)
			}
			fake.Push(turn)
			won := make(chan *openai.ChatCompletion, 1)
			go func() {
				res, err := c.Chat.Completions.New(ctx, withCall(p, "call_1", `{"city":"Oslo"}`, "-6C"))
				if err != nil {
					t.Error(err)
				}
				won <- res
			}()
			<-started
			var res *openai.ChatCompletion
			if winnerDone {
				res = <-won
			}
			close(release)
			expectError(t, <-lost, http.StatusConflict, "conflict_error", "", "conversation_moved_on")
			if !winnerDone {
				close(gate)
				res = <-won
			}
			if res == nil || chatOf(t, res) != id || res.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("winner: %+v", res)
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
