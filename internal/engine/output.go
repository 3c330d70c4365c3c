package engine

import (
	"fmt"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/jsonscan"
)

// checkOutput reads answer, a final answer (it calls no tool), against the
// turn's format, if it has one, and returns the outcome that records it:
// a valid answer gets its structured output (chat.PartOutput) beside its
// text; an invalid one is followed by a request to repair it
// (chat.RepairRequest), while the turn has repairs left; else the run
// fails, keeping the answer, with chat.KindOutputInvalid.
func (r *run) checkOutput(answer *chat.Message) *stepOutcome {
	format := r.chat.TurnOutput()
	if format == nil {
		return &stepOutcome{answer: answer}
	}
	out, err := parseOutput(*format, *answer)
	if err == nil {
		answer.Parts = append(answer.Parts, chat.Part{Type: chat.PartOutput, JSON: out})
		return &stepOutcome{answer: answer}
	}
	if r.chat.OutputRepairs >= r.e.cfg.MaxRepairs {
		return &stepOutcome{answer: answer, failure: outputInvalid(err, r.chat.OutputRepairs)}
	}
	return &stepOutcome{answer: answer, repair: r.repairRequest(*format, err), stepDone: true}
}

// parseOutput reads the text of answer against format (OutputFormat.Parse),
// refusing a value too deeply nested to store.
func parseOutput(format chat.OutputFormat, answer chat.Message) ([]byte, error) {
	out, err := format.Parse(chat.AnswerText(answer))
	if err == nil && jsonscan.Depth(out) > chat.MaxStoredDepth {
		err = fmt.Errorf("the answer is nested deeper than %d levels", chat.MaxStoredDepth)
	}
	return out, err
}

// repairRequest is the user message that asks the model to answer again
// in format, quoting why its answer was not valid.
func (r *run) repairRequest(format chat.OutputFormat, why error) *chat.Message {
	return &chat.Message{ChatID: r.chat.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.RepairRequest(format, why)}}
}

// outputInvalid is the failure of a turn whose answer was not valid after
// repairs repair requests.
func outputInvalid(why error, repairs int) *chat.ChatError {
	return &chat.ChatError{Kind: chat.KindOutputInvalid, Retryable: true, Message: fmt.Sprintf(
		"the answer is not valid against the response format after %d repair requests: %v; "+
			"retry to ask the model again, or edit the message", repairs, why)}
}

// repairAnswered returns the outcome that begins a run over a history
// whose turn ended with an answer not valid against the turn's format (a
// retry after chat.KindOutputInvalid): one more request to repair it, whatever
// the count of repairs, so a retry always asks the model again; nil when
// there is nothing to repair.
func (r *run) repairAnswered(history []chat.Message) *stepOutcome {
	format := r.chat.TurnOutput()
	last := history[len(history)-1]
	if format == nil || last.Role != chat.RoleAssistant || chat.OutputOf(last) != nil {
		return nil
	}
	_, err := parseOutput(*format, last)
	if err == nil {
		// Valid against a format it was not asked in (the format
		// changed since): it needs no repair, but has no output either.
		return nil
	}
	return &stepOutcome{repair: r.repairRequest(*format, err), stepDone: true}
}
