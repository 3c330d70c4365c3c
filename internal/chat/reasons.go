package chat

// The outputs of the error results parley writes for calls that did not
// run to a result of their own: every sentence the model reads about a call
// parley answered in the tool's place is here, so they stay consistent.
const (
	// ReasonNewMessage answers the open calls of a chat whose user sent a
	// new message instead of their results.
	ReasonNewMessage = "cancelled: the user sent a new message"
	// ReasonInterrupted answers the open calls of an interrupted run.
	ReasonInterrupted = "cancelled: interrupted"
	// ReasonUnknownOutcome answers a call that may have started but whose
	// result was never recorded (its worker died, or the write of its
	// result failed): the model should check before it repeats a call that
	// is not idempotent.
	ReasonUnknownOutcome = "outcome unknown: the run stopped before this call's result was recorded; the tool may have run"
	// ReasonCancelledWhileRunning starts the result of a call stopped after
	// it started: the model must not take it for a call that never ran.
	ReasonCancelledWhileRunning = "cancelled while it ran, so it may have taken effect"
	// ReasonNotExecuted starts the result of a call that never started
	// (its step was cancelled, or its source failed first).
	ReasonNotExecuted = "not executed"
	// ReasonNoResultMayHaveRun ends the result of a call whose source was
	// lost while the call was in flight.
	ReasonNoResultMayHaveRun = "the call got no result and may have run"
	// ReasonStepFailed answers the calls of a step that never started
	// because another part of the step failed (a tool source).
	ReasonStepFailed = "not executed: another part of this step failed, so the run stopped"
	// ReasonNoResult is the result ForModel makes up for a call that has
	// none in the history, so the model never sees a dangling call.
	ReasonNoResult = "no result was recorded for this call; the tool may or may not have run"
	// ReasonDeadline answers a client's call whose result did not come
	// before the chat's deadline.
	ReasonDeadline = "no result before deadline"
	// ReasonNoDecision is the denial reason of a call nobody decided on
	// before the deadline.
	ReasonNoDecision = "no decision before deadline"
	// DeniedPrefix starts the result of a call a person denied.
	DeniedPrefix       = "denied"
	reasonDeniedFormat = "denied: %s"
)

// KindSpendLimit is the kind of a chat's last_error when its run stopped
// because the owner's spend or token budget was reached: the message says
// which limit, the period, when it resets, and that retry, or a new
// message, goes on once the budget allows.
const KindSpendLimit = "spend_limit"

// KindOutputInvalid is the kind of a chat's last_error when its turn's
// final answer was still not valid against the turn's format after the
// repairs allowed: retry, or an edit, goes on.
const KindOutputInvalid = "structured_output_invalid"
