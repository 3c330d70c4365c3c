package facade_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// withAgents adds a second model, "big" (the fake's gpt-big, with images,
// PDFs and a known window), and a configured agent, "helper", on "fake".
func withAgents(d *api.Deps) {
	fake := d.Config.Models[0]
	d.Config.Models = append(d.Config.Models, config.Model{Name: "big", Provider: "openai", Model: "gpt-big",
		BaseURL: fake.BaseURL, APIKeyEnv: fake.APIKeyEnv, Inputs: []string{"text", "image", "pdf"}, ContextWindow: 128000})
	d.Config.Agents = []agent.Agent{{Name: "helper", Version: 1, Source: agent.SourceConfig,
		Definition: agent.Definition{Model: "fake", SystemPrompt: "You help."}}}
}

// createAgent creates an agent of tok's owner through parley's API.
func (r *replica) createAgent(tok string, body map[string]any) {
	r.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", r.url+"/api/v1/agents", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		var out any
		_ = json.NewDecoder(res.Body).Decode(&out)
		r.t.Fatalf("create agent %v: %d %v", body["name"], res.StatusCode, out)
	}
}

// modelOf is the model the fake's i-th request asked for.
func modelOf(t *testing.T, fake *llmtest.OpenAIChat, i int) string {
	t.Helper()
	var body struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(fake.Requests()[i].Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Model
}

// TestAgentModels checks that /v1/models lists the owner's agents and the
// configured ones as "agent:<name>", after the configured models, each
// with its model's inputs and window, and never another owner's agent.
func TestAgentModels(t *testing.T) {
	run := func(t *testing.T, r *replica) {
		ctx := context.Background()
		alice, bob := r.token("alice"), r.token("bob")
		ac, bc := r.client(alice), r.client(bob)
		r.createAgent(alice, map[string]any{"name": "researcher", "model": "big", "system_prompt": "You research."})
		r.createAgent(bob, map[string]any{"name": "bobs", "system_prompt": "Bob's."})

		page, err := ac.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		if want := []string{"fake", "big", "agent:helper", "agent:researcher"}; !slices.Equal(ids, want) {
			t.Fatalf("alice's models %v, want %v", ids, want)
		}
		var entry struct {
			ID            string   `json:"id"`
			Inputs        []string `json:"inputs"`
			ContextWindow *int64   `json:"context_window"`
		}
		if err := json.Unmarshal([]byte(page.Data[3].RawJSON()), &entry); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(entry.Inputs, []string{"text", "image", "pdf"}) || entry.ContextWindow == nil || *entry.ContextWindow != 128000 {
			t.Fatalf("agent:researcher listed as %s", page.Data[3].RawJSON())
		}
		m, err := ac.Models.Get(ctx, "agent:researcher")
		if err != nil || m.ID != "agent:researcher" || m.Object != "model" {
			t.Fatalf("GET agent:researcher: %+v, %v", m, err)
		}
		if _, err := ac.Models.Get(ctx, "agent:helper"); err != nil {
			t.Fatalf("GET agent:helper: %v", err)
		}
		_, err = ac.Models.Get(ctx, "agent:bobs")
		expectError(t, err, http.StatusNotFound, "invalid_request_error", "model", "model_not_found")

		page, err = bc.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = nil
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		if want := []string{"fake", "big", "agent:bobs", "agent:helper"}; !slices.Equal(ids, want) {
			t.Fatalf("bob's models %v, want %v", ids, want)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		r, _ := newSQLite(t, withAgents)
		run(t, r)
	})
	t.Run("postgres", func(t *testing.T) {
		r, _ := newPostgres(t, withAgents)
		run(t, r)
	})
}

// TestAgentAsModel runs chats from agents through both APIs: the agent's
// model and system prompt run them, what the request gives overrides the
// agent's, and another owner's agent is model_not_found.
func TestAgentAsModel(t *testing.T) {
	r, fake := newSQLite(t, withAgents)
	ctx := context.Background()
	alice := r.token("alice")
	c := r.client(alice)
	r.createAgent(alice, map[string]any{"name": "researcher", "model": "big", "system_prompt": "You research."})
	r.createAgent(r.token("bob"), map[string]any{"name": "bobs"})

	fake.Push(llmtest.Turn{Text: "Researched."})
	res, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "agent:researcher",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Look into it")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != "Researched." || res.Model != "agent:researcher" {
		t.Fatalf("completion %s", res.RawJSON())
	}
	msgs, _ := modelRequest(t, fake, 0)
	if modelOf(t, fake, 0) != "gpt-big" || !slices.Equal(roles(msgs), []string{"system", "user"}) || contentString(msgs[0].Content) != "You research." {
		t.Fatalf("the model (%s) got %+v", modelOf(t, fake, 0), msgs)
	}
	ch := r.onlyChat("alice")
	if ch.Agent != "researcher" || ch.AgentVersion != 1 || ch.Model != "big" || ch.SystemPrompt != "You research." || ch.Labels["api"] != "openai-chat" {
		t.Fatalf("chat %+v", ch)
	}

	// A Responses request's instructions override the agent's prompt; the
	// configured agent runs on its own model.
	fake.Push(llmtest.Turn{Text: "Helped."})
	resp, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "agent:helper", Input: text("Help me"),
		Instructions: openai.String("Help briefly.")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != "Helped." || resp.Model != "agent:helper" {
		t.Fatalf("response %s", resp.RawJSON())
	}
	msgs, _ = modelRequest(t, fake, 1)
	if modelOf(t, fake, 1) != "gpt-test" || contentString(msgs[0].Content) != "Help briefly." {
		t.Fatalf("the model (%s) got %+v", modelOf(t, fake, 1), msgs)
	}

	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "agent:bobs",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	expectError(t, err, http.StatusNotFound, "invalid_request_error", "model", "model_not_found")
	if n := len(r.chats("alice")); n != 2 || len(fake.Requests()) != 2 {
		t.Fatalf("alice has %d chats after %d model requests", n, len(fake.Requests()))
	}
}

// TestAgentOutputSchema checks that an agent's output_schema holds for
// the chats the facade makes from it: the answer is its JSON alone, after
// a repair, with no response_format in the request; and that a request's
// {"type": "text"} asks for free text instead.
func TestAgentOutputSchema(t *testing.T) {
	r, fake := newSQLite(t)
	c := r.client(r.token("alice"))
	r.createAgent(r.token("alice"), map[string]any{"name": "extractor", "system_prompt": "Extract the person.", "output_schema": personSchema()})

	fake.Push(llmtest.Turn{Text: proseAnswer}, llmtest.Turn{Text: fencedAnswer})
	res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "agent:extractor",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Ada Lovelace was 36.")}})
	if err != nil {
		t.Fatal(err)
	}
	checkPerson(t, res.Choices[0].Message.Content)
	if n := repairs(t, r, r.onlyChat("alice").ID); n != 1 {
		t.Fatalf("%d repair requests, want 1", n)
	}

	fake.Push(llmtest.Turn{Text: proseAnswer})
	res, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "agent:extractor",
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfText: &openai.ResponseFormatTextParam{}},
		Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about her.")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != proseAnswer || len(fake.Requests()) != 3 {
		t.Fatalf("free text %q after %d model requests", res.Choices[0].Message.Content, len(fake.Requests()))
	}
}
