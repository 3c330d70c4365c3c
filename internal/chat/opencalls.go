package chat

// OpenCalls are the calls of a history's last assistant message that have
// no result, sorted by what may have become of them. A run that begins
// (the worker before it may have died) and work stopped while no run holds
// the chat (an interrupt, or a new message with busy "interrupt", of a
// pending chat) both need to know, so that a call that may have run is
// never answered as one that did not.
type OpenCalls struct {
	// Approved are calls a person approved that were never marked started
	// (PartToolStarted): they never ran, and a run makes them next.
	Approved []ToolCall
	// Unseen are calls nobody could have run: calls of the chat's dynamic
	// tools, which only a client runs, and server-side calls waiting for a
	// person's decision.
	Unseen []ToolCall
	// MayHaveRun are the server-side calls a worker may have started
	// before it stopped without recording their results, approved calls
	// marked started among them.
	MayHaveRun []ToolCall
	// all are every open call, in call order.
	all []ToolCall
}

// SortOpenCalls sorts the open calls of history (a chat's messages from
// its last assistant message on, at least). dynamic are the chat's dynamic
// tools; needsDecision reports a server-side tool whose calls wait for a
// person's approval (the tool's policy, or the chat's approve globs).
func SortOpenCalls(history []Message, dynamic []DynamicTool, needsDecision func(name string) bool) OpenCalls {
	o := OpenCalls{all: UnresolvedCalls(history)}
	approved, _ := ApprovedCalls(history)
	isApproved := make(map[string]bool, len(approved))
	for _, c := range approved {
		isApproved[c.ToolCallID] = true
	}
	isDynamic := make(map[string]bool, len(dynamic))
	for _, t := range dynamic {
		isDynamic[t.Name] = true
	}
	decided := Decisions(history)
	for _, c := range o.all {
		_, hasDecision := decided[c.ToolCallID]
		switch {
		case isApproved[c.ToolCallID]:
		case isDynamic[c.ToolName]:
			o.Unseen = append(o.Unseen, c)
		case needsDecision(c.ToolName) && !hasDecision && len(approved) == 0:
			// Undecided, so it never ran: a run leaves it for a person
			// again.
			o.Unseen = append(o.Unseen, c)
		default:
			o.MayHaveRun = append(o.MayHaveRun, c)
		}
	}
	// Approved keeps the person's edited arguments.
	o.Approved = approved
	return o
}

// Stopped answers every open call of work that was stopped: a call that
// may have run gets ReasonUnknownOutcome, so the model checks before it
// repeats a side effect; the others (never ran) get reason. The results
// are in call order, for one tool message.
func (o OpenCalls) Stopped(reason string) []Part {
	mayHaveRun := make(map[string]bool, len(o.MayHaveRun))
	for _, c := range o.MayHaveRun {
		mayHaveRun[c.ToolCallID] = true
	}
	parts := make([]Part, 0, len(o.all))
	for _, c := range o.all {
		r := reason
		if mayHaveRun[c.ToolCallID] {
			r = ReasonUnknownOutcome
		}
		parts = append(parts, SyntheticResults([]ToolCall{c}, r)...)
	}
	return parts
}
