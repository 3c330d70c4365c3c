package openai

import (
	"context"
	"strconv"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/parleyhq/parley/internal/llm"
)

// Responses is a model behind OpenAI's Responses API.
type Responses struct {
	cfg    Config
	client sdk.Client
}

// NewResponses returns a Responses API provider.
func NewResponses(cfg Config) *Responses { return &Responses{cfg: cfg, client: newClient(cfg)} }

// Name reports the provider's name for errors and logs.
func (*Responses) Name() string { return "openai-responses" }

// Stream makes one streaming call, with store off: parley keeps the
// history. Reasoning deltas come from reasoning summaries (when
// Config.ReasoningSummary asks for them) or raw reasoning text (open-weight
// models served with the Responses API); a new summary part is separated
// from the previous one by a blank line. The stream is complete at
// response.completed or response.incomplete (finish reason "length" or
// "content_filter"); response.failed and error events become errors, and
// a stream ending before any of them is a cut stream.
func (p *Responses) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	params, err := p.params(req)
	if err != nil {
		return llm.Result{}, &llm.Error{Kind: "bad_request", Provider: p.Name(), Message: err.Error(), Err: err}
	}
	stream := p.client.Responses.NewStreaming(ctx, params)
	defer stream.Close()

	a := &answer{emit: emit}
	s := responsesState{byItem: map[string]int{}}
	for stream.Next() {
		if err := s.add(a, stream.Current()); err != nil {
			return llm.Result{}, err
		}
		if s.done {
			break
		}
	}
	if !s.done {
		if err := stream.Err(); err != nil {
			return llm.Result{}, classify(ctx, p.Name(), err)
		}
		return llm.Result{}, cutStream(p.Name(), nil)
	}
	if err := a.endCalls(); err != nil {
		return llm.Result{}, err
	}
	return llm.Result{Parts: a.parts(), Usage: s.usage, FinishReason: a.finish(s.reason)}, nil
}

// params maps a request to the API's parameters.
func (p *Responses) params(req llm.Request) (responses.ResponseNewParams, error) {
	params := responses.ResponseNewParams{
		Model: shared.ResponsesModel(model(p.cfg, req)),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responsesInput(req.Messages)},
		Store: sdk.Bool(false),
	}
	if req.System != "" {
		params.Instructions = sdk.String(req.System)
	}
	for _, t := range req.Tools {
		tool, err := responsesTool(t)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, tool)
	}
	if req.MaxOutputTokens > 0 {
		params.MaxOutputTokens = sdk.Int(int64(req.MaxOutputTokens))
	}
	if p.cfg.ReasoningEffort != "" || p.cfg.ReasoningSummary != "" {
		params.Reasoning = shared.ReasoningParam{
			Effort:  shared.ReasoningEffort(p.cfg.ReasoningEffort),
			Summary: shared.ReasoningSummary(p.cfg.ReasoningSummary),
		}
	}
	if f := req.Format; f != nil {
		sch, err := formatSchema(*f)
		if err != nil {
			return params, err
		}
		js := responses.ResponseFormatTextJSONSchemaConfigParam{Name: f.Name, Schema: sch}
		if f.Strict {
			js.Strict = sdk.Bool(true)
		}
		params.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &js}}
	}
	return params, nil
}

// responsesState follows one stream's output items.
type responsesState struct {
	byItem        map[string]int // function_call item id → the answer's call index
	reasoningPart string         // the reasoning item and summary part streaming now
	done          bool
	reason        string
	usage         llm.Usage
}

// add folds one event into the answer, emitting its deltas; a failure the
// server reports comes back as an *llm.Error.
func (s *responsesState) add(a *answer, ev responses.ResponseStreamEventUnion) error {
	const provider = "openai-responses"
	switch ev.Type {
	case "response.output_text.delta", "response.refusal.delta":
		return a.addText(ev.Delta)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		part := ev.ItemID + "/" + ev.Type + "/" + strconv.FormatInt(ev.SummaryIndex, 10) + "/" + strconv.FormatInt(ev.ContentIndex, 10)
		if s.reasoningPart != "" && part != s.reasoningPart && a.reasoning.Len() > 0 {
			if err := a.addReasoning("\n\n"); err != nil {
				return err
			}
		}
		s.reasoningPart = part
		return a.addReasoning(ev.Delta)
	case "response.output_item.added":
		item := ev.Item
		if item.Type != "function_call" {
			return nil
		}
		i, err := a.startCall(item.CallID, item.Name)
		if err != nil {
			return err
		}
		s.byItem[item.ID] = i
		return a.addArgs(i, item.Arguments.OfString)
	case "response.function_call_arguments.delta":
		if i, ok := s.byItem[ev.ItemID]; ok {
			return a.addArgs(i, ev.Delta)
		}
	case "response.function_call_arguments.done":
		if i, ok := s.byItem[ev.ItemID]; ok {
			return a.endCall(i, ev.Arguments)
		}
	case "response.output_item.done":
		if i, ok := s.byItem[ev.Item.ID]; ok && ev.Item.Type == "function_call" {
			return a.endCall(i, ev.Item.Arguments.OfString)
		}
	case "response.completed", "response.incomplete":
		u := ev.Response.Usage
		s.usage = llm.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
		s.done = true
		s.reason = "stop"
		if ev.Type == "response.incomplete" {
			s.reason = incompleteReason(ev.Response.IncompleteDetails.Reason)
		}
	case "response.failed":
		e := ev.Response.Error
		return eventError(provider, string(e.Code), e.Type, e.Message, nil)
	case "error":
		return eventError(provider, ev.Code, "", ev.Message, nil)
	}
	return nil
}

// incompleteReason maps why a response stopped early to a finish reason.
func incompleteReason(reason string) string {
	switch reason {
	case "max_output_tokens":
		return "length"
	case "":
		return "incomplete"
	}
	return reason
}
