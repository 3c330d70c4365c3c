package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/jsonscan"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// loop runs the run: its beginning, then a model call and its tools per
// step, recording each outcome (record), until the chat is let go. A
// returned error is a failure of parley itself (a read of the database),
// not of the model or a tool; a lost lease returns store.ErrLeaseLost.
func (r *run) loop(ctx context.Context) error {
	o, model, err := r.begin(ctx)
	steps := 0
	var tried compactions // since the last model call
	for err == nil {
		if o == nil {
			if o, err = r.next(ctx, model, steps+1, &tried); err != nil {
				break
			}
			if o.compaction == nil {
				steps++
			}
		}
		if o.compaction == nil {
			tried = compactions{}
		}
		var more bool
		if more, err = r.record(ctx, *o); err != nil || !more {
			return err
		}
		if len(o.run) > 0 {
			o = ptr(r.runTools(ctx, *o))
		} else {
			o = nil
		}
	}
	if ctx.Err() != nil {
		_, err = r.record(ctx, stepOutcome{}) // a read cut short: the run ends by why it was stopped
	}
	return err
}

// compactions are the compactions a run tried since its last model call:
// one of each kind at most, so a step is compacted before it once, and
// made again after an overflow once.
type compactions struct{ auto, overflow bool }

// next returns the outcome of the run's next step: a compaction first,
// when its history nears the model's window, else the step-th model call;
// after the provider found that call too long, a compaction, so the step
// is made again; or the end of a run past the limit of model calls, or
// whose owner's budget is reached (overBudget).
func (r *run) next(ctx context.Context, model llm.Model, step int, tried *compactions) (*stepOutcome, error) {
	limit := r.e.cfg.MaxSteps
	if n := r.chat.MaxSteps; n > 0 && n < limit {
		limit = n // the chat's agent asks for fewer
	}
	if step > limit {
		return ptr(failed("max_steps", fmt.Sprintf("the run reached the limit of %d model calls; retry to continue", limit))), nil
	}
	if o, err := r.overBudget(ctx, goOnRetry); o != nil || err != nil {
		return o, err
	}
	defs := toolDefs(r.e.tools.Decls(ctx), r.chat.Tools, r.chat.DynamicTools)
	if due, tokens := r.dueForCompaction(model, fixedTokens(r.chat.SystemPrompt, defs)); due && !tried.auto {
		tried.auto = true
		if o := r.compact(ctx, model, chat.CompactAuto, tokens); o != nil {
			if o.failure == nil {
				return o, nil
			}
			// The step may still fit: a failed summary ends nothing.
			r.log.Warn("compaction failed; making the step without it", "err", o.failure.Message)
		}
	}
	o, err := r.step(ctx, model, step, defs)
	if err != nil || o.failure == nil || o.failure.Kind != llm.KindContextLength {
		return o, err
	}
	if tried.overflow {
		o.failure = overflowed(o.failure)
		return o, nil
	}
	tried.overflow, tried.auto = true, true
	c := r.compact(ctx, model, chat.CompactOverflow, chat.ContextTokens(r.history, 0))
	if c == nil { // nothing to summarise
		o.failure = overflowed(o.failure)
		return o, nil
	}
	return c, nil // the summary, or why it failed, or the run was stopped
}

func ptr[T any](v T) *T { return &v }

// begin reads what the run starts from, and returns what to record before
// the first model call (nil: nothing), or the outcome that ends the run at
// once. A worker that died may have left calls of the last step without a
// result: they are answered "outcome unknown", except calls a person
// approved that were never marked started, which run now, once, and the
// calls nobody could have run yet: calls of the chat's dynamic tools, which
// only a client runs, and calls waiting for a person's decision, which
// nobody gave; the chat waits for them as the step would have.
func (r *run) begin(ctx context.Context) (*stepOutcome, llm.Model, error) {
	if n := r.chat.LeaseRecoveries; n >= r.e.cfg.MaxRecoveries {
		return ptr(failed("worker_died", fmt.Sprintf(
			"the workers running this chat stopped %d times in a row before finishing a step; retry to run it again", n))), llm.Model{}, nil
	}
	model, ok := r.e.models.Model(r.chat.Model)
	if !ok {
		return ptr(failed("unknown_model", fmt.Sprintf("model %q is not configured on this server", r.chat.Model))), llm.Model{}, nil
	}
	history, err := r.readHistory(ctx)
	if err != nil {
		return nil, model, err
	}
	r.history = history
	if len(history) == 0 {
		return ptr(failed("internal", "the chat has no message to answer")), model, nil
	}
	unresolved := chat.UnresolvedCalls(history)
	if len(unresolved) == 0 && !r.chat.InterruptRequested {
		switch {
		case r.chat.CompactRequested:
			if o, err := r.overBudget(ctx, goOnCompact); o != nil || err != nil {
				return o, model, err
			}
			return r.compactAsked(ctx, model), model, nil
		case answered(history):
			if o := r.repairAnswered(history); o != nil {
				return o, model, nil
			}
			return &stepOutcome{done: true}, model, nil
		}
		return nil, model, nil // the common case: nothing left open
	}
	needsDecision := map[string]bool{}
	for _, d := range r.e.tools.Decls(ctx) {
		needsDecision[d.Name] = d.Required || r.chat.Approve.Match(d.Name)
	}
	open := chat.SortOpenCalls(history, r.chat.DynamicTools, func(name string) bool { return needsDecision[name] })
	if r.chat.InterruptRequested {
		// The interrupt arrived while no step ran (the worker that was
		// asked died): there is nothing to stop. The calls that may have
		// run (approved ones marked started among them) say so; the
		// others are cancelled, and the queued messages answered.
		r.cancel(errInterrupted)
		o := &stepOutcome{}
		if parts := open.Stopped(chat.ReasonInterrupted); len(parts) > 0 {
			o.tool = &chat.Message{ChatID: r.chat.ID, Role: chat.RoleTool, Parts: parts}
		}
		return o, model, nil
	}
	o := &stepOutcome{run: append(open.Approved, open.Unseen...), approved: len(open.Approved) > 0}
	if len(open.MayHaveRun) > 0 || len(open.Approved) > 0 {
		// One tool message: the results of the calls that may have run,
		// then the marks of the approved calls about to run, written
		// before they run.
		parts := append(chat.SyntheticResults(open.MayHaveRun, chat.ReasonUnknownOutcome), chat.StartedMarks(open.Approved)...)
		o.tool = &chat.Message{ChatID: r.chat.ID, Role: chat.RoleTool, Parts: parts}
	}
	return o, model, nil
}

// compactAsked is the outcome of a run asked to compact the chat (POST
// /compact): the summary, and the chat waits again; nothing, when there
// is nothing to summarise. A user message nobody answered at the end of
// the history (sent with busy "interrupt" or promoted by an interrupt
// while the compaction waited, or left by a run that failed before it
// answered) is answered after the summary: then the run goes on (a nil
// outcome when there was nothing to summarise).
func (r *run) compactAsked(ctx context.Context, model llm.Model) *stepOutcome {
	goOn := endsWithUser(r.history)
	o := r.compact(ctx, model, chat.CompactManual, chat.ContextTokens(r.history, 0))
	switch {
	case o == nil && goOn:
		return nil
	case o == nil:
		return &stepOutcome{done: true}
	case o.failure != nil:
		o.failure.Message += "; compact again, or send a message"
	case !o.partial:
		o.done = !goOn
	}
	return o
}

// endsWithUser reports whether the history's last message but compactions
// is a user message: one the model has not answered.
func endsWithUser(history []chat.Message) bool {
	for i := len(history) - 1; i >= 0; i-- {
		if m := history[i]; !chat.IsCompaction(m) {
			return m.Role == chat.RoleUser
		}
	}
	return false
}

// answered reports whether the history ends with an answer of the model
// that calls nothing: a run has nothing to answer (a retry after a failed
// compaction).
func answered(history []chat.Message) bool {
	for i := len(history) - 1; i >= 0; i-- {
		if m := history[i]; !chat.IsCompaction(m) {
			return m.Role == chat.RoleAssistant && len(chat.CallsOf(m)) == 0
		}
	}
	return false
}

// forModel returns what the model sees of the run's history: chat.ForModel
// of it, built by the first step and then extended with what later steps
// added (an assistant message and its results: ForModel of that tail is
// what ForModel of the whole would end with).
func (r *run) forModel() []chat.Message {
	if r.view == nil || r.viewed > len(r.history) {
		r.view, r.viewed = chat.ForModel(r.history), len(r.history)
	}
	if r.viewed < len(r.history) {
		r.view = append(r.view, chat.ForModel(r.history[r.viewed:])...)
		r.viewed = len(r.history)
	}
	return r.view
}

// step makes one model call (the step-th of the run) and returns what came
// of it: an answer whose calls run next, an answer that ends the run, what
// streamed before the run was stopped, or the model's failure.
func (r *run) step(ctx context.Context, model llm.Model, step int, defs []llm.ToolDef) (*stepOutcome, error) {
	if step == 1 {
		r.maybeTitle(model, r.history)
	}
	req := llm.Request{Model: model.ModelID, System: r.chat.SystemPrompt, Messages: r.withFiles(ctx, r.forModel()), Tools: defs,
		Format: r.chat.TurnOutput()}

	msgID, err := r.e.nextMessageID(ctx, r.history[len(r.history)-1].ID)
	if err != nil {
		return nil, err
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
	switch {
	case callErr != nil && ctx.Err() != nil:
		o := &stepOutcome{partial: true}
		if parts := pub.partial(); len(parts) > 0 {
			o.answer = &chat.Message{ID: msgID, ChatID: r.chat.ID, Role: chat.RoleAssistant, Parts: parts}
		}
		return o, nil
	case callErr != nil:
		return &stepOutcome{failure: modelError(callErr), open: chat.ReasonUnknownOutcome}, nil
	}
	answer := &chat.Message{ID: msgID, ChatID: r.chat.ID, Role: chat.RoleAssistant, Parts: res.Parts,
		Usage: &chat.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens, CostMicros: model.Cost(res.Usage)}}
	// The calls run, and are announced, as they are stored: storable, with
	// ids of their own. Only arguments too deep to store keep the model's,
	// for the dispatcher to refuse the call.
	asked := chat.CallsOf(*answer)
	chat.MakeStorable(answer)
	r.uniqueCallIDs(answer.Parts)
	calls := chat.CallsOf(*answer)
	for i, c := range asked {
		if jsonscan.Depth(c.Args) > chat.MaxStoredDepth {
			calls[i].Args = c.Args
		}
	}
	if len(calls) == 0 {
		return r.checkOutput(answer), nil // the turn's final answer
	}
	// The calls are recorded before they run: if this worker dies
	// meanwhile, the next one answers them instead of losing them.
	return &stepOutcome{answer: answer, run: calls}, nil
}

// uniqueCallIDs gives each tool call of an answer's parts an id no other
// call of the chat has: some models and OpenAI-compatible servers number
// their calls per answer ("call_1" in every step), or repeat one within
// an answer, and a result must name exactly one call. A repeated (or
// empty) id gets a suffix; the model reads the new id in the history.
func (r *run) uniqueCallIDs(parts []chat.Part) {
	if r.callIDs == nil {
		r.callIDs = map[string]bool{}
		for _, m := range r.history {
			for _, c := range chat.CallsOf(m) {
				r.callIDs[c.ToolCallID] = true
			}
		}
	}
	for i := range parts {
		p := &parts[i]
		if p.Type != chat.PartToolCall {
			continue
		}
		id := p.ToolCallID
		for n := 2; id == "" || r.callIDs[id]; n++ {
			id = fmt.Sprintf("%s_%d", cmp.Or(p.ToolCallID, "call"), n)
		}
		p.ToolCallID = id
		r.callIDs[id] = true
	}
}

// runTools runs the calls of o, which record wrote, and returns what came
// of them: results, calls left for a client or a person, or a source's
// failure.
func (r *run) runTools(ctx context.Context, o stepOutcome) stepOutcome {
	var callsBy int64 // the assistant message that made the calls
	for i := len(r.history) - 1; i >= 0 && callsBy == 0; i-- {
		if r.history[i].Role == chat.RoleAssistant {
			callsBy = r.history[i].ID
		}
	}
	step := tools.Step{ChatID: r.chat.ID, Calls: o.run, Dynamic: r.chat.DynamicTools, Tools: r.chat.Tools, Approved: o.approved}
	if !o.approved {
		step.AlsoApprove = r.chat.Approve
	}
	var over atomic.Bool // a report after the calls returned (an abandoned tool's) is dropped
	step.Progress = func(c chat.ToolCall, p tool.Progress) {
		if !over.Load() {
			r.steps.progress(callsBy, c, p)
		}
	}
	// Stopped meanwhile, the dispatcher starts none of the calls, and
	// still leaves the client's and the undecided ones waiting.
	out := r.e.tools.Run(ctx, step)
	over.Store(true)
	next := stepOutcome{awaiting: out.Awaiting, stepDone: true}
	if len(out.Results) > 0 {
		next.tool = &chat.Message{ChatID: r.chat.ID, Role: chat.RoleTool, Parts: out.Results}
	}
	if len(out.Failures) > 0 {
		f := out.Failures[0]
		next.failure, next.open = &chat.ChatError{Kind: "source", Source: f.Source, Message: f.Error()}, chat.ReasonStepFailed
	}
	return next
}

// modelError turns a failed model call into the chat's last_error.
func modelError(err error) *chat.ChatError {
	var le *llm.Error
	if errors.As(err, &le) {
		return &chat.ChatError{Kind: le.Kind, Message: le.Message, Provider: le.Provider, HTTPStatus: le.HTTPStatus, Retryable: le.Retryable}
	}
	return &chat.ChatError{Kind: "provider", Message: err.Error()}
}

// readHistory reads the chat's history from its newest compaction on: what
// the model sees, and all a run needs (the calls still open are after
// it). It starts from the page read with the acquisition, reading on only
// past a full one.
func (r *run) readHistory(ctx context.Context) ([]chat.Message, error) {
	first := r.first
	r.first = nil
	var msgs []chat.Message
	err := r.e.untilAvailable(ctx, r.log, func(ctx context.Context) error {
		start := first
		if start == nil {
			byChat, err := r.e.st.SinceCompaction(ctx, []string{r.chat.ID}, firstPage)
			if err != nil {
				return err
			}
			start = byChat[r.chat.ID]
		}
		if len(start) < firstPage {
			msgs = start
			return nil
		}
		var err error
		msgs, err = readOn(ctx, r.e.st, r.chat.ID, slices.Clone(start))
		return err
	})
	return msgs, err
}

// readOn appends to msgs, the start of a chat's history from its newest
// compaction on, the rest of it.
func readOn(ctx context.Context, r store.Reader, chatID string, msgs []chat.Message) ([]chat.Message, error) {
	after := msgs[len(msgs)-1].ID
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
