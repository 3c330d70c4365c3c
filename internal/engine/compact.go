package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
)

// compactionPrompt is the summarising call's system prompt.
const compactionPrompt = `You summarise a conversation between a user and an AI assistant (with its tool calls and their results) so that the assistant can continue it without the original messages, which no longer fit its context window.

Write a summary that keeps, concisely:
- the user's goals and requests, and any constraints or preferences they stated;
- decisions made, and facts established, with their reasons where they matter;
- exact names: files, paths, URLs, identifiers, commands, numbers, quoted values;
- what tools returned that still matters (results, errors, what was tried and failed);
- what was done and what remains to do, with the current state of any task in progress.
Leave out pleasantries and anything superseded. Write in the conversation's language. Answer with the summary only.`

// compactionAsk follows the transcript in the summarising call's one message.
const compactionAsk = "\n\nSummarise the conversation above as instructed."

// keepShare is the part of the window the turns kept verbatim may take,
// when more than the last one fits.
const keepShare = 4 // a quarter

// compactionAttempts bounds the summarising calls of one compaction: each
// one the provider refuses as too long is tried again with half the
// transcript.
const compactionAttempts = 4

// fixedTokens estimates what a request carries besides its messages: the
// system prompt and the tools' definitions.
func fixedTokens(system string, defs []llm.ToolDef) int64 {
	return llm.Request{System: system, Tools: defs}.EstimateTokens()
}

// dueForCompaction reports whether the next step's request would pass the
// model's compact_at share of its window, and the estimate it went by.
func (r *run) dueForCompaction(model llm.Model, fixed int64) (bool, int64) {
	tokens := chat.ContextTokens(r.history, fixed)
	if model.ContextWindow <= 0 || model.CompactAt <= 0 {
		return false, tokens
	}
	return float64(tokens) > model.CompactAt*float64(model.ContextWindow), tokens
}

// compact summarises the run's history up to the turns kept verbatim
// (chat.CompactionCut) and returns the outcome that records the summary,
// nil when there is nothing to summarise. tokens is the context's
// estimate that made it compact. A failed summarising call is the
// outcome's failure; a stopped one an empty outcome, which ends the run
// by why it was stopped.
func (r *run) compact(ctx context.Context, model llm.Model, source string, tokens int64) *stepOutcome {
	previous, live := chat.SplitAtSummary(r.history)
	window := model.ContextWindow
	basis := window
	if basis <= 0 {
		basis = tokens // unknown: what overflowed is the measure
	}
	cut := chat.CompactionCut(live, basis/keepShare)
	if cut == 0 {
		return nil
	}
	cm := model
	if model.CompactionModel != "" {
		if m, ok := r.e.models.Model(model.CompactionModel); ok {
			cm = m
		}
	}
	budget := transcriptBudget(previous, live[:cut], cm.ContextWindow)
	provider := llm.Retrying(cm.Provider, r.e.cfg.Retry, nil)
	var (
		res llm.Result
		err error
	)
	for range compactionAttempts {
		text := chat.Transcript(previous, live[:cut], budget) + compactionAsk
		req := llm.Request{Model: cm.ModelID, System: compactionPrompt,
			Messages: []chat.Message{{ChatID: r.chat.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart(text)}}}}
		res, err = provider.Stream(ctx, req, func(llm.Event) error { return nil })
		if !llm.IsContextLength(err) {
			break
		}
		budget /= 2
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return &stepOutcome{partial: true}
	case err != nil:
		f := modelError(err)
		f.Message = "summarising the conversation failed: " + f.Message
		return &stepOutcome{failure: f, open: chat.ReasonUnknownOutcome}
	}
	var summary strings.Builder
	for _, p := range res.Parts {
		if p.Type == chat.PartText {
			summary.WriteString(p.Text)
		}
	}
	if strings.TrimSpace(summary.String()) == "" {
		return &stepOutcome{failure: &chat.ChatError{Kind: "compaction_failed", Retryable: true,
			Message: "the model wrote an empty summary of the conversation; retry, or compact again"}, open: chat.ReasonUnknownOutcome}
	}
	r.log.Info("compacted the history", "source", source, "tokens_before", tokens, "window", window,
		"through", live[cut-1].ID, "summary_tokens", chat.EstimateText(summary.String()))
	return &stepOutcome{compaction: &chat.Message{ChatID: r.chat.ID, Role: chat.RoleAssistant,
		Parts: []chat.Part{{Type: chat.PartCompaction, Summary: summary.String(), Source: source,
			TokensBefore: tokens, ContextWindow: window, ThroughMessageID: live[cut-1].ID}},
		Usage: &chat.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens, CostMicros: cm.Cost(res.Usage)}}}
}

// transcriptBudget is the most tokens the transcript of a compaction over
// previous and msgs may take (chat.Transcript): all of it, as the
// transcript counts it (the previous summary under its header, each
// message under its role line), so nothing is left out of a transcript
// that fits; but when the summarising model's window is known, no more
// than three quarters of it less the call's instructions, so the call fits
// and the summary has room.
func transcriptBudget(previous *chat.Part, msgs []chat.Message, window int64) int64 {
	budget := chat.TranscriptTokens(previous, msgs)
	if window > 0 {
		budget = min(budget, window*3/4-chat.EstimateText(compactionPrompt+compactionAsk))
	}
	return budget
}

// overflowed is the failure of a step whose request was too long for the
// model even after a compaction, or with nothing left to compact: it says
// what the person can do.
func overflowed(f *chat.ChatError) *chat.ChatError {
	f.Kind, f.Retryable = llm.KindContextLength, false
	f.Message = fmt.Sprintf("the conversation no longer fits the model's context window, and what is left to summarise does not make it fit (%s). "+
		"Edit or regenerate to shorten the last turn, fork the chat from an earlier message, or send a new message (the turns before it can then be summarised)", f.Message)
	return f
}
