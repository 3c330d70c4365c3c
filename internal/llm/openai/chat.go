package openai

import (
	"context"
	"encoding/json"
	"strconv"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/parleyhq/parley/internal/llm"
)

// Chat is a model behind the Chat Completions API: OpenAI's, or any
// OpenAI-compatible server's.
type Chat struct {
	cfg    Config
	client sdk.Client
}

// NewChat returns a Chat Completions provider.
func NewChat(cfg Config) *Chat { return &Chat{cfg: cfg, client: newClient(cfg)} }

// Name reports the provider's name for errors and logs.
func (*Chat) Name() string { return "openai" }

// Stream makes one streaming call. Reasoning deltas are read from
// delta.reasoning_content or delta.reasoning, as OpenAI-compatible servers
// send them; a refusal streams as text. Tool calls end when the choice's
// finish_reason arrives. Since the SDK consumes data: [DONE] itself, a
// stream is complete once a finish_reason arrived and the body ended
// cleanly; anything less is a cut stream. MaxOutputTokens is sent as
// max_completion_tokens, the name OpenAI's reasoning models require.
func (p *Chat) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	params, err := p.params(req)
	if err != nil {
		return llm.Result{}, &llm.Error{Kind: "bad_request", Provider: p.Name(), Message: err.Error(), Err: err}
	}
	stream := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()

	a := &answer{emit: emit}
	s := chatState{byWire: map[int64]int{}}
	for stream.Next() {
		if err := s.add(a, stream.Current()); err != nil {
			return llm.Result{}, err // emit's error, as is
		}
	}
	if err := stream.Err(); err != nil {
		return llm.Result{}, classify(ctx, p.Name(), err)
	}
	if !s.finished {
		return llm.Result{}, cutStream(p.Name(), nil)
	}
	return llm.Result{Parts: a.parts(), Usage: s.usage, FinishReason: a.finish(s.reason)}, nil
}

// params maps a request to the API's parameters.
func (p *Chat) params(req llm.Request) (sdk.ChatCompletionNewParams, error) {
	params := sdk.ChatCompletionNewParams{
		Model:         shared.ChatModel(model(p.cfg, req)),
		Messages:      chatMessages(req),
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	for _, t := range req.Tools {
		tool, err := chatTool(t)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, tool)
	}
	if req.MaxOutputTokens > 0 {
		params.MaxCompletionTokens = sdk.Int(int64(req.MaxOutputTokens))
	}
	if p.cfg.ReasoningEffort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(p.cfg.ReasoningEffort)
	}
	if f := req.Format; f != nil {
		// The schema goes as written: its keys in the client's order.
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: f.Name, Schema: json.RawMessage(f.Schema)}
		if f.Strict {
			js.Strict = sdk.Bool(true)
		}
		params.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}
	}
	return params, nil
}

// chatState follows one stream's choice 0 across chunks.
type chatState struct {
	byWire   map[int64]int // the chunk's tool call index → the answer's call index
	finished bool
	reason   string
	usage    llm.Usage
}

// add folds one chunk into the answer, emitting its deltas.
func (s *chatState) add(a *answer, chunk sdk.ChatCompletionChunk) error {
	if chunk.JSON.Usage.Valid() {
		s.usage = llm.Usage{InputTokens: chunk.Usage.PromptTokens, OutputTokens: chunk.Usage.CompletionTokens}
	}
	for _, choice := range chunk.Choices {
		if choice.Index != 0 {
			continue // parley never asks for n > 1
		}
		d := choice.Delta
		if err := a.addReasoning(reasoningDelta(d)); err != nil {
			return err
		}
		if err := a.addText(d.Content); err != nil {
			return err
		}
		if err := a.addText(d.Refusal); err != nil {
			return err
		}
		for _, tc := range d.ToolCalls {
			i, known := s.byWire[tc.Index]
			// A new id at a known index is a new call: some servers number
			// every call 0.
			if !known || (tc.ID != "" && tc.ID != a.calls[i].id) {
				id := tc.ID
				if id == "" {
					id = chunk.ID + "-call" + strconv.Itoa(len(a.calls))
				}
				var err error
				if i, err = a.startCall(id, tc.Function.Name); err != nil {
					return err
				}
				s.byWire[tc.Index] = i
			}
			if err := a.addArgs(i, tc.Function.Arguments); err != nil {
				return err
			}
		}
		if choice.FinishReason != "" {
			s.finished = true
			s.reason = choice.FinishReason
			if err := a.endCalls(); err != nil {
				return err
			}
		}
	}
	return nil
}

// reasoningDelta reads the reasoning text OpenAI-compatible servers add to
// a delta: reasoning_content (vLLM, DeepSeek, llama.cpp) or reasoning
// (Ollama, OpenRouter).
func reasoningDelta(d sdk.ChatCompletionChunkChoiceDelta) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		if f, ok := d.JSON.ExtraFields[key]; ok {
			var s string
			if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
				return s
			}
		}
	}
	return ""
}
