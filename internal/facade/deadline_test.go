package facade_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/store"
)

// pastDeadline moves the deadline of chat id, which waits for the client's
// results, a minute into the past, through the store in one transaction:
// no sweep answers the calls in the client's place (the engine sweeps as
// it starts and then hourly). It returns the chat as it is now.
func (r *replica) pastDeadline(id string) chat.Chat {
	r.t.Helper()
	ctx := context.Background()
	var c chat.Chat
	err := r.st.InTx(ctx, func(tx store.Tx) error {
		for _, tr := range []store.Transition{
			{From: chat.RequiresAction, To: chat.Pending},
			{From: chat.Pending, To: chat.Running},
			{From: chat.Running, To: chat.RequiresAction, ActionTimeout: -time.Minute},
		} {
			var err error
			if c, err = tx.TransitionChat(ctx, id, tr); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	if c.ActionDeadline == nil {
		r.t.Fatalf("chat %s has no deadline", id)
	}
	return c
}

// TestResultsAfterTheDeadline: a chat waits for the client's result and
// its deadline has passed, but no sweep has answered in the client's
// place yet. A continuation through either API, streamed or not, is 409
// deadline_passed, its message naming the deadline; nothing is written,
// no chat is started, the model is not called.
func TestResultsAfterTheDeadline(t *testing.T) {
	onBothStores(t, func(t *testing.T, r *replica, fake *llmtest.OpenAIChat) {
		ctx := context.Background()
		// check refuses the continuation's answers, then checks that owner's
		// one chat is as it was.
		check := func(t *testing.T, owner string, before chat.Chat, continuations func() []continuation) {
			t.Helper()
			history, requests := r.history(before.ID), len(fake.Requests())
			deadline := before.ActionDeadline.UTC().Format(time.RFC3339Nano)
			for _, c := range continuations() {
				if c.err == nil {
					t.Fatalf("%s: no error", c.name)
				}
				expectError(t, c.err, http.StatusConflict, "conflict_error", "", "deadline_passed")
				if msg := errMessage(c.err); !strings.Contains(msg, deadline) || !strings.Contains(msg, before.ID) {
					t.Fatalf("%s: message %q names neither the deadline %s nor the chat %s", c.name, msg, deadline, before.ID)
				}
			}
			after := r.onlyChat(owner)
			if after.Status != chat.RequiresAction || after.Version != before.Version ||
				!after.ActionDeadline.Equal(*before.ActionDeadline) || !reflect.DeepEqual(after.Labels, before.Labels) {
				t.Fatalf("after the refused continuations the chat is %s, version %d, deadline %v, labels %v; want %s, %d, %v, %v",
					after.Status, after.Version, after.ActionDeadline, after.Labels, before.Status, before.Version, before.ActionDeadline, before.Labels)
			}
			if got := r.history(before.ID); !reflect.DeepEqual(got, history) {
				t.Fatalf("the refused continuations wrote: %d messages, want %d", len(got), len(history))
			}
			if n := len(fake.Requests()); n != requests {
				t.Fatalf("the model got %d requests, want %d", n, requests)
			}
		}

		t.Run("chat completions", func(t *testing.T) {
			tok := r.token("alice")
			c := r.client(tok)
			p := askWeather("Oslo")
			fake.Push(callOslo())
			if _, err := c.Chat.Completions.New(ctx, p); err != nil {
				t.Fatal(err)
			}
			before := r.pastDeadline(r.onlyChat("alice").ID)
			check(t, "alice", before, func() []continuation {
				next := withCall(p, "call_1", `{"city":"Oslo"}`, "-5C")
				_, err := c.Chat.Completions.New(ctx, next)
				s := c.Chat.Completions.NewStreaming(ctx, next)
				for s.Next() {
				}
				return []continuation{{"non-streamed", err}, {"streamed", s.Err()}}
			})
		})

		t.Run("responses", func(t *testing.T) {
			tok := r.token("bob")
			c := r.client(tok)
			fake.Push(callOslo())
			res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "fake", Input: text("Weather in Oslo?"),
				Tools: []responses.ToolUnionParam{weatherFunction()}})
			if err != nil {
				t.Fatal(err)
			}
			before := r.pastDeadline(r.onlyChat("bob").ID)
			check(t, "bob", before, func() []continuation {
				next := responses.ResponseNewParams{Model: "fake", PreviousResponseID: openai.String(res.ID), Input: callOutput("call_1", "-5C")}
				_, err := c.Responses.New(ctx, next)
				s := c.Responses.NewStreaming(ctx, next)
				for s.Next() {
				}
				return []continuation{{"non-streamed", err}, {"streamed", s.Err()}}
			})
		})
	})
}

// continuation is how one refused continuation ended.
type continuation struct {
	name string
	err  error
}
