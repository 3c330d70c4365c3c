package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// Reasons written into synthetic results.
const (
	reasonDeadline = "no result before deadline"
	// reasonStepFailed answers the calls of a step that were never run
	// because another part of it failed (a tool source).
	reasonStepFailed = "not executed: another part of this step failed, so the run stopped"
)

// loop runs steps until the chat is let go. A returned error is a failure of
// parley itself (the database), not of the model or a tool; a lost lease
// returns store.ErrLeaseLost.
func (r *run) loop(ctx context.Context) error {
	if r.chat.InterruptRequested {
		// The interrupt arrived while no step ran (the worker that was asked
		// died): there is nothing to stop, so answer the queued messages.
		if err := r.finishInterrupted(); err != nil {
			return err
		}
		return nil
	}
	if n := r.chat.LeaseRecoveries; n >= r.e.cfg.MaxRecoveries {
		r.fail(&chat.ChatError{Kind: "worker_died", Message: fmt.Sprintf(
			"the workers running this chat stopped %d times in a row before finishing a step; retry to run it again", n)}, service.ReasonUnknownOutcome)
		return nil
	}
	model, ok := r.e.models.Model(r.chat.Model)
	if !ok {
		r.fail(&chat.ChatError{Kind: "unknown_model", Message: fmt.Sprintf("model %q is not configured on this server", r.chat.Model)}, service.ReasonUnknownOutcome)
		return nil
	}
	history, err := r.history(ctx)
	if err != nil {
		return r.stopped(ctx, err)
	}
	if len(r.approved) > 0 {
		if done, err := r.runApproved(ctx, history); err != nil || done {
			return err
		}
	}
	for step := 1; ; step++ {
		if step > r.e.cfg.MaxSteps {
			r.fail(&chat.ChatError{Kind: "max_steps", Message: fmt.Sprintf("the run reached the limit of %d model calls; retry to continue", r.e.cfg.MaxSteps)}, service.ReasonUnknownOutcome)
			return nil
		}
		history, err := r.history(ctx)
		if err != nil {
			return r.stopped(ctx, err)
		}
		if step == 1 {
			r.maybeTitle(model, history)
		}
		done, err := r.step(ctx, model, history)
		if err != nil || done {
			return err
		}
	}
}

// history returns the chat's messages: read from the store by the run's
// first step, which first answers any call a dead worker left without a
// result (so the model never sees a dangling call), and kept in memory
// after that (run.msgs).
func (r *run) history(ctx context.Context) ([]chat.Message, error) {
	if r.msgs != nil {
		return r.msgs, nil
	}
	msgs, err := r.readHistory(ctx)
	if err != nil {
		return nil, err
	}
	open := chat.UnresolvedCalls(msgs)
	if r.chat.LeaseRecoveries == 0 {
		// Calls a person approved run now, once: if this worker dies while
		// they run, the next one finds the lease recovered and answers them
		// "outcome unknown" below rather than running them again.
		r.approved = chat.ApprovedCalls(msgs)
		open = slices.DeleteFunc(open, func(c chat.ToolCall) bool {
			return slices.ContainsFunc(r.approved, func(a chat.ToolCall) bool { return a.ToolCallID == c.ToolCallID })
		})
	}
	if len(open) > 0 {
		m := chat.Message{ChatID: r.chat.ID, Role: chat.RoleTool, Parts: chat.SyntheticResults(open, service.ReasonUnknownOutcome)}
		err = r.write(func(ctx context.Context, tx store.Tx, n *events.Notice) error {
			return insert(ctx, tx, n, &m)
		})
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	r.msgs = msgs
	return msgs, nil
}

// runApproved runs the calls a person approved (r.approved, of the last
// assistant message of history) and writes their results.
func (r *run) runApproved(ctx context.Context, history []chat.Message) (done bool, err error) {
	calls := r.approved
	r.approved = nil
	callsBy := int64(0)
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == chat.RoleAssistant {
			callsBy = history[i].ID
			break
		}
	}
	return r.runTools(ctx, callsBy, history[len(history)-1].ID, tools.Step{Calls: calls, Tools: r.chat.Tools, Approved: true})
}

// forModel returns what the model sees of history (the run's msgs):
// chat.ForModel of it, built by the first step and then extended with what
// later steps added (an assistant message and its results: ForModel of that
// tail is what ForModel of the whole would end with).
func (r *run) forModel(history []chat.Message) []chat.Message {
	if r.view == nil || r.viewed > len(history) {
		r.view, r.viewed = chat.ForModel(history), len(history)
	}
	if r.viewed < len(history) {
		r.view = append(r.view, chat.ForModel(history[r.viewed:])...)
		r.viewed = len(history)
	}
	return r.view
}

// wrote adds messages the run has written (committed) to its history.
func (r *run) wrote(msgs ...*chat.Message) {
	for _, m := range msgs {
		if m != nil {
			r.msgs = append(r.msgs, *m)
		}
	}
}

// step makes one model call and runs its tool calls. done reports that the
// run let go of the chat.
func (r *run) step(ctx context.Context, model llm.Model, history []chat.Message) (done bool, err error) {
	if len(history) == 0 {
		r.fail(&chat.ChatError{Kind: "internal", Message: "the chat has no message to answer"}, service.ReasonUnknownOutcome)
		return true, nil
	}
	defs := toolDefs(r.e.tools.Decls(ctx), r.chat.Tools, r.chat.DynamicTools)
	req := llm.Request{Model: model.ModelID, System: r.chat.SystemPrompt, Messages: r.forModel(history), Tools: defs}

	msgID, err := r.e.nextMessageID(ctx, history[len(history)-1].ID)
	if err != nil {
		return false, r.stopped(ctx, err)
	}
	pub := r.steps.begin(r.e, r.chat.ID, msgID)
	provider := llm.Retrying(model.Provider, r.e.cfg.Retry, func(info llm.RetryInfo) {
		r.e.announce(ctx, func(n *events.Notice) {
			n.ChatEvent(r.chat.ID, events.ChatEvent{Kind: events.KindRetry, Retry: &events.RetryInfo{
				Attempt: info.Attempt, DelayMS: info.Delay.Milliseconds(), Error: info.Err.Error()}})
		})
	})
	res, callErr := provider.Stream(ctx, req, pub.emit)
	pub.end()
	if callErr != nil {
		if ctx.Err() != nil {
			var partial *chat.Message
			if parts := pub.partial(); len(parts) > 0 {
				partial = &chat.Message{ID: msgID, ChatID: r.chat.ID, Role: chat.RoleAssistant, Parts: parts}
			}
			return true, r.cutShort(ctx, partial, nil)
		}
		r.fail(modelError(callErr), service.ReasonUnknownOutcome)
		return true, nil
	}

	asst := &chat.Message{ID: msgID, ChatID: r.chat.ID, Role: chat.RoleAssistant, Parts: res.Parts,
		Usage: &chat.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens, CostMicros: model.Cost(res.Usage)}}
	calls := toolCalls(res.Parts)
	if len(calls) == 0 {
		return true, r.finishIdle(asst) // the answer and the end of the run: one transaction
	}
	// The calls are persisted before they run: if this worker dies meanwhile,
	// the next one answers them (history) instead of losing them.
	if err := r.write(func(ctx context.Context, tx store.Tx, n *events.Notice) error {
		if err := insert(ctx, tx, n, asst); err != nil {
			return err
		}
		return tx.AddUsage(ctx, r.chat.ID, *asst.Usage)
	}); err != nil {
		return false, err
	}
	r.wrote(asst)

	return r.runTools(ctx, asst.ID, asst.ID, tools.Step{Calls: calls, Tools: r.chat.Tools, Approve: r.chat.Approve})
}

// runTools runs the server-side calls of step, made by the assistant
// message callsBy, and writes their results after message last: it goes on
// (done false) when none is left for anyone, or lets go of the chat, which
// waits for a client or a person (requires_action) or failed.
func (r *run) runTools(ctx context.Context, callsBy, last int64, step tools.Step) (done bool, err error) {
	step.ChatID, step.Dynamic = r.chat.ID, r.chat.DynamicTools
	var over atomic.Bool // a report after the calls returned (an abandoned tool's) is dropped
	step.Progress = func(c chat.ToolCall, p tool.Progress) {
		if !over.Load() {
			r.steps.progress(callsBy, c, p)
		}
	}
	out := r.e.tools.Run(ctx, step)
	over.Store(true)
	var results *chat.Message
	if len(out.Results) > 0 {
		// Until written, the results are the run's to keep: a failure
		// from here on writes them with it.
		results = &chat.Message{ChatID: r.chat.ID, Role: chat.RoleTool, Parts: out.Results}
		r.unsaved = []*chat.Message{results}
		id, err := r.e.nextMessageID(context.WithoutCancel(ctx), last)
		if err != nil {
			return false, err
		}
		results.ID = id
	}
	switch {
	case ctx.Err() != nil:
		return true, r.cutShort(ctx, nil, results, out.Pending...)
	case len(out.Failures) > 0:
		f := out.Failures[0]
		r.fail(&chat.ChatError{Kind: "source", Source: f.Source, Message: f.Error()}, reasonStepFailed, results)
		return true, nil
	case len(out.Pending) > 0:
		return true, r.requireAction(out.Pending, results)
	}
	if results != nil {
		if err := r.write(func(ctx context.Context, tx store.Tx, n *events.Notice) error {
			return insert(ctx, tx, n, results)
		}); err != nil {
			return false, err
		}
	}
	r.unsaved = nil
	r.wrote(results)
	return false, nil
}

// insert appends messages (nil ones skipped) inside a write and records them
// for the chat's stream. Their usage is the caller's to add to the chat
// (Tx.AddUsage).
func insert(ctx context.Context, tx store.Tx, n *events.Notice, msgs ...*chat.Message) error {
	for _, m := range msgs {
		if m == nil {
			continue
		}
		if err := tx.InsertMessage(ctx, m); err != nil {
			return err
		}
		n.Message(*m)
	}
	return nil
}

// cutShort ends a run whose context was cancelled, by its cause: an
// interrupt keeps the partial answer, writes the results of tools that ran,
// cancels the open calls and promotes queued messages; a shutdown writes the
// results and hands the chat back (the next worker makes the model call
// again, so a partial answer is dropped), or, when the step's client calls
// (pending) are still to be answered, leaves the chat waiting for them as
// the step would have; a lost lease writes nothing.
func (r *run) cutShort(ctx context.Context, partial, results *chat.Message, pending ...chat.ToolCall) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errLeaseLost):
		return store.ErrLeaseLost
	case errors.Is(cause, errInterrupted):
		return r.finishInterrupted(partial, results)
	case len(pending) > 0:
		return r.requireAction(pending, results)
	default:
		return r.handBack(results)
	}
}

// stopped handles an error met while the run's context may be cancelled: a
// cancelled run ends by its cause, anything else is returned.
func (r *run) stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return r.cutShort(ctx, nil, nil)
	}
	return err
}

// modelError turns a failed model call into the chat's last_error.
func modelError(err error) *chat.ChatError {
	var le *llm.Error
	if errors.As(err, &le) {
		return &chat.ChatError{Kind: le.Kind, Message: le.Message, Provider: le.Provider, HTTPStatus: le.HTTPStatus, Retryable: le.Retryable}
	}
	return &chat.ChatError{Kind: "provider", Message: err.Error()}
}

// toolCalls lists the tool-call parts of an answer.
func toolCalls(parts []chat.Part) []chat.ToolCall {
	var calls []chat.ToolCall
	for _, p := range parts {
		if p.Type == chat.PartToolCall {
			calls = append(calls, chat.ToolCall{ToolCallID: p.ToolCallID, ToolName: p.ToolName, Args: p.Args})
		}
	}
	return calls
}

// readHistory reads the chat's whole history: on the first step it starts
// from the page read with the acquisition, reading on only past a full one.
func (r *run) readHistory(ctx context.Context) ([]chat.Message, error) {
	first := r.first
	r.first = nil
	if first != nil && len(first) < firstPage {
		return first, nil
	}
	var msgs []chat.Message
	err := untilAvailable(ctx, r.log, func(ctx context.Context) (err error) {
		msgs, err = readOn(ctx, r.e.st, r.chat.ID, first)
		return err
	})
	return msgs, err
}

// readOn appends to msgs, the start of a chat's history (none: nil), the
// rest of it.
func readOn(ctx context.Context, r store.Reader, chatID string, msgs []chat.Message) ([]chat.Message, error) {
	var after int64
	if len(msgs) > 0 {
		after = msgs[len(msgs)-1].ID
	}
	err := store.ForEachMessage(ctx, r, chatID, after, func(m chat.Message) error {
		msgs = append(msgs, m)
		return nil
	})
	return msgs, err
}

// toolDefs lists what the model may call: the server's tools the chat
// selects (chat.ToolGlobs.Selects: every one without a selection) and the
// chat's dynamic tools, which the selection does not filter. A dynamic tool
// wins over a server tool that took its name later (a source's list
// changed), as the dispatcher decides.
func toolDefs(server []tools.Decl, selected chat.ToolGlobs, dynamic []chat.DynamicTool) []llm.ToolDef {
	defs := make([]llm.ToolDef, 0, len(server)+len(dynamic))
	taken := make(map[string]bool, len(dynamic))
	for _, t := range dynamic {
		taken[t.Name] = true
	}
	for _, t := range server {
		if !taken[t.Name] && selected.Selects(t.Name) {
			defs = append(defs, llm.ToolDef{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
		}
	}
	for _, t := range dynamic {
		defs = append(defs, llm.ToolDef{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return defs
}
