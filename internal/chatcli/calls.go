package chatcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/parleyhq/parley/client"
)

// answerCalls shows each call the chat waits on and asks for its result
// (a dynamic tool) or for the decision on it (an approval), then posts the
// results and the decisions; each call is asked about once. While it asks,
// it watches the stream: when the chat moves on without these answers (the
// deadline passed, another client answered), it says so at once and
// returns, leaving the events to the turn.
func (s *chatSession) answerCalls(ctx context.Context, calls []client.ToolCall, deadline time.Time) error {
	var fresh []client.ToolCall
	for _, c := range calls {
		if !s.asked[c.ToolCallID] {
			fresh = append(fresh, c)
			s.asked[c.ToolCallID] = true
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	s.endLine()
	s.work.clear()
	s.watch = newCallWatch(fresh, deadline)
	defer func() { s.watch = nil }()
	// The events read but not handled yet came after these calls: they may
	// show the chat has moved on already.
	for _, ev := range s.backlog {
		if s.watch.reason = s.watch.judge(ev); s.watch.reason != "" {
			break
		}
	}
	err := s.answer(ctx, fresh, deadline)
	var mo *movedOnError
	if errors.As(err, &mo) {
		fmt.Fprintf(s.info, "the chat moved on: %s\n", mo.reason)
		if !strings.HasPrefix(mo.reason, "another client") {
			for id := range s.watch.calls {
				s.answered[id] = true // their results say what was just said
			}
		}
		for _, id := range s.watch.stillPending {
			delete(s.asked, id) // asked again when the turn reads that they wait
		}
		return nil
	}
	return err
}

// answer asks about the calls and posts the answers.
func (s *chatSession) answer(ctx context.Context, calls []client.ToolCall, deadline time.Time) error {
	var (
		results   []client.ToolResult
		approvals []client.ToolCall
		decisions []client.Decision
	)
	for _, call := range calls {
		if call.NeedsApproval() {
			if !deadline.IsZero() {
				fmt.Fprintf(s.info, "(decide by %s)\n", deadlineText(deadline, time.Now()))
			}
			d, err := s.askDecision(ctx, call)
			if err != nil {
				return err
			}
			approvals, decisions = append(approvals, call), append(decisions, d)
			continue
		}
		fmt.Fprintf(s.info, "tool call %s %s\n", call.ToolName, compactJSON(call.Args))
		prompt := "result (JSON, text, or !error TEXT)> "
		if !deadline.IsZero() {
			prompt = fmt.Sprintf("result (JSON, text, or !error TEXT; by %s)> ", deadlineText(deadline, time.Now()))
		}
		line, err := s.ask(ctx, prompt)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("end of input while tool call %s waits for its result", call.ToolCallID)
			}
			return err
		}
		results = append(results, parseResult(call.ToolCallID, line))
	}
	if len(results) > 0 {
		_, err := s.c.SubmitToolResults(ctx, s.chatID, results)
		var ae *client.APIError
		switch {
		case errors.As(err, &ae) && ae.StatusCode == http.StatusConflict:
			fmt.Fprintf(s.info, "(results not taken: the chat is %v now)\n", ae.Details["status"])
		case err != nil:
			return fmt.Errorf("submit the tool results: %w", err)
		default:
			for _, r := range results {
				s.answered[r.ToolCallID] = true
				s.watch.forget(r.ToolCallID) // the chat moves on with them
			}
		}
	}
	if len(approvals) > 0 {
		if err := s.decide(ctx, approvals, decisions); err != nil {
			return err
		}
	}
	s.busy("waiting for the model")
	return nil
}

// deadlineText is when a deadline is, in local time, and how long is left
// at now.
func deadlineText(deadline, now time.Time) string {
	local := deadline.Local()
	when := local.Format("15:04:05")
	if y, m, d := local.Date(); y != now.Local().Year() || m != now.Local().Month() || d != now.Local().Day() {
		when = local.Format("Jan 2 15:04:05")
	}
	left := deadline.Sub(now).Round(time.Second)
	if left <= 0 {
		return when + ", passed"
	}
	return fmt.Sprintf("%s, %s left", when, left)
}

// callWatch follows the stream while the person is asked about calls, to
// tell when the chat moves on without the answers.
type callWatch struct {
	calls    map[string]bool // the calls still waiting for this person's answers
	deadline time.Time
	reason   string // the backlog showed it moved on already

	// stillPending are the calls the chat waits for after it moved on (a
	// requires_action status without some of the calls asked about).
	stillPending []string
}

func newCallWatch(calls []client.ToolCall, deadline time.Time) *callWatch {
	w := &callWatch{calls: map[string]bool{}, deadline: deadline}
	for _, c := range calls {
		w.calls[c.ToolCallID] = true
	}
	return w
}

// forget stops watching a call this person answered.
func (w *callWatch) forget(id string) { delete(w.calls, id) }

// judge says why ev shows that the chat moved on without the answers, or ""
// when it does not.
func (w *callWatch) judge(ev client.ChatEvent) string {
	if w == nil || len(w.calls) == 0 {
		return ""
	}
	switch ev.Kind {
	case client.EventMessage:
		for _, p := range ev.Message.Parts {
			if w.calls[p.ToolCallID] && (p.Type == client.PartToolResult || p.Type == client.PartToolDecision) {
				return answeredBy(p)
			}
		}
	case client.EventStatus:
		switch {
		case ev.Chat == nil:
		case ev.Status != client.StatusRequiresAction:
			if !w.deadline.IsZero() && !time.Now().Before(w.deadline) {
				return "the deadline passed"
			}
			if ev.Status == client.StatusError {
				return "the run failed"
			}
			return "another client answered"
		case ev.Chat.RequiredAction != nil:
			return w.missing(ev.Chat.RequiredAction.ToolCalls)
		}
	case client.EventActionRequired:
		return w.missing(ev.ToolCalls)
	}
	return ""
}

// missing tells whether some of the calls asked about no longer wait among
// pending, which then are the calls the chat waits for.
func (w *callWatch) missing(pending []client.ToolCall) string {
	waiting := map[string]bool{}
	for _, c := range pending {
		waiting[c.ToolCallID] = true
	}
	for id := range w.calls {
		if !waiting[id] {
			w.stillPending = w.stillPending[:0]
			for _, c := range pending {
				w.stillPending = append(w.stillPending, c.ToolCallID)
			}
			return "another client answered"
		}
	}
	return ""
}

// answeredBy says who answered a call, from the part that answered it.
func answeredBy(p client.Part) string {
	if p.Type == client.PartToolDecision {
		if p.Decision != nil && p.Decision.DecidedBy != "" {
			return "another client decided (" + p.Decision.DecidedBy + ")"
		}
		return "another client decided"
	}
	var out string
	json.Unmarshal(p.Output, &out)
	switch {
	case p.IsError && strings.Contains(out, "before deadline"):
		return "the deadline passed"
	case p.IsError && out == "cancelled: interrupted":
		return "it was interrupted"
	case p.IsError && out == "cancelled: the user sent a new message":
		return "a new message was sent to it"
	}
	return "another client answered"
}

// movedOnError ends a prompt when the chat moved on without the answer.
type movedOnError struct{ reason string }

func (e *movedOnError) Error() string { return "the chat moved on: " + e.reason }

// parseResult reads a typed result: "!error TEXT", a JSON value, or text.
func parseResult(callID, line string) client.ToolResult {
	if msg, ok := strings.CutPrefix(line, "!error"); ok && (msg == "" || msg[0] == ' ') {
		return client.ErrorResult(callID, strings.TrimSpace(msg))
	}
	if json.Valid([]byte(line)) {
		return client.ToolResult{ToolCallID: callID, Output: json.RawMessage(line)}
	}
	return client.TextResult(callID, line)
}

// compactJSON renders arguments on one line.
func compactJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
