package chatcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parleyhq/parley/client"
)

// chatSession is one terminal conversation with a chat: one event stream,
// open for the whole session, read in the background (events), so that the
// prompts for tool calls can watch it while they wait for input.
type chatSession struct {
	c      *client.Client
	chatID string
	stream *client.ChatStream
	out    io.Writer // the answers
	info   io.Writer // chat id, tool calls, prompts, notices
	work   *statusLine
	in     *lineReader

	events    chan client.ChatEvent // the stream's events; closed when it ends
	streamErr error                 // why it ended; set before events is closed
	ended     bool                  // events is closed
	backlog   []client.ChatEvent    // events read while asking, not handled yet
	watch     *callWatch            // the calls being asked about, while asked
	quit      chan struct{}         // closed when the session ends

	seen     int64           // the highest message id known
	since    int64           // a user message above this id is the turn's
	printed  map[int64]bool  // messages shown (or whose deltas were)
	asked    map[string]bool // the tool call ids asked about
	answered map[string]bool // calls whose results are not shown: this person's answers and denials, and calls whose end was told
	midLine  bool            // the answer output does not end with a newline
	streamed map[int64]bool

	files      []client.File // attached to the next message (--file, /attach)
	minVersion int64         // an idle status ends the turn only if the chat's version is above it
	failed     error         // the last turn ended with the chat in error (a *chatFailedError)
}

// create makes the chat with its first message and opens its stream.
func (s *chatSession) create(ctx context.Context, req client.CreateChatRequest) error {
	ch, err := s.c.CreateChat(ctx, req)
	if err != nil {
		return fmt.Errorf("create the chat: %w", s.worded(err))
	}
	s.files = nil // they went with the first message
	s.chatID = ch.ID
	fmt.Fprintf(s.info, "chat %s\n", ch.ID)
	for _, w := range ch.Warnings {
		fmt.Fprintf(s.info, "warning: %s\n", w)
	}
	if err := s.openStream(ctx, 0); err != nil {
		return fmt.Errorf("stream the chat: %w", err)
	}
	s.busy("waiting for the model")
	return nil
}

// open opens the stream of an existing chat after its last message. A chat
// that waits for tool results or decisions shows its calls and asks for
// them at once, and its answer streams until it is idle again.
func (s *chatSession) open(ctx context.Context, id string) error {
	msgs, err := s.c.AllMessages(ctx, id, 0)
	if err != nil {
		return fmt.Errorf("read chat %s: %w", id, err)
	}
	s.chatID = id
	if len(msgs) > 0 {
		s.seen = msgs[len(msgs)-1].ID
	}
	if err := s.openStream(ctx, s.seen); err != nil {
		return fmt.Errorf("stream chat %s: %w", id, err)
	}
	ev, ok := s.next(ctx)
	if !ok {
		return s.streamEnded(ctx)
	}
	if ev.Status != client.StatusRequiresAction || ev.Chat == nil || ev.Chat.RequiredAction == nil {
		return nil
	}
	ra := ev.Chat.RequiredAction
	fmt.Fprintf(s.info, "chat %s waits for answers to its tool calls:\n", id)
	if err := s.answerCalls(ctx, ra.ToolCalls, ra.Deadline); err != nil {
		return err
	}
	return s.turn(ctx, true)
}

// openStream opens the chat's stream after the message id after, and reads
// it in the background into s.events.
func (s *chatSession) openStream(ctx context.Context, after int64) error {
	st, err := s.c.Stream(ctx, s.chatID, after)
	if err != nil {
		return err
	}
	s.stream, s.events = st, make(chan client.ChatEvent)
	go func() {
		defer close(s.events)
		for st.Next() {
			select {
			case s.events <- st.Event():
			case <-s.quit:
				return
			}
		}
		s.streamErr = st.Err()
	}()
	return nil
}

// next returns the next event to handle: from the backlog, else from the
// stream; false once the stream ended (or ctx did).
func (s *chatSession) next(ctx context.Context) (client.ChatEvent, bool) {
	if len(s.backlog) > 0 {
		ev := s.backlog[0]
		s.backlog = s.backlog[1:]
		return ev, true
	}
	if s.ended {
		return client.ChatEvent{}, false
	}
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.ended = true
		}
		return ev, ok
	case <-ctx.Done():
		return client.ChatEvent{}, false
	}
}

// post sends a user message; the turn then waits for its answer.
func (s *chatSession) post(ctx context.Context, msg string) error {
	s.since, s.minVersion = s.seen, 0
	res, err := s.c.PostMessage(ctx, s.chatID, client.PostMessageRequest{Content: content(msg, s.files)})
	if err != nil {
		return fmt.Errorf("send the message: %w", s.worded(err))
	}
	s.files = nil
	if res.Queued != nil {
		fmt.Fprintln(s.info, "(the chat is busy: your message is queued and answered next)")
	}
	s.busy("waiting for the model")
	return nil
}

// turn streams the answer to the last message until the chat is idle,
// answering the tool calls it waits for on the way. With anyIdle, the first
// idle status ends it (no message of the turn was sent: the chat runs on
// after its calls were answered).
func (s *chatSession) turn(ctx context.Context, anyIdle bool) error {
	sawUser := false
	for {
		ev, ok := s.next(ctx)
		if !ok {
			break
		}
		switch ev.Kind {
		case client.EventStatus:
			if ev.Chat == nil {
				continue
			}
			switch ev.Status {
			case client.StatusPending:
				s.busy("waiting for the model")
			case client.StatusRunning:
				s.busy("the model is working")
			case client.StatusRequiresAction:
				if ra := ev.Chat.RequiredAction; ra != nil {
					label := waitingLabel(ra.ToolCalls, s.asked, s.answered)
					if err := s.answerCalls(ctx, ra.ToolCalls, ra.Deadline); err != nil {
						return err
					}
					s.waitFor(label)
				}
			}
			// An Initial status (a new connection) was read after the
			// message was sent: idle means answered.
			if (ev.Status == client.StatusWaiting || ev.Status == client.StatusError) && (sawUser || ev.Initial || anyIdle) &&
				ev.Chat.Version > s.minVersion {
				return s.finish(ctx, *ev.Chat)
			}
		case client.EventMessage:
			m := *ev.Message
			if m.Role == client.RoleUser && !m.IsRepair() && m.ID > s.since {
				sawUser = true
			}
			s.show(m)
		case client.EventPart:
			if ev.Part.Type == client.DeltaToolProgress {
				s.busy(progressLabel(*ev.Part))
				continue
			}
			if ev.Part.Type == client.DeltaText && !s.printed[ev.MessageID] {
				s.write(ev.Part.Text)
				s.streamed[ev.MessageID] = true
			}
		case client.EventActionRequired:
			label := waitingLabel(ev.ToolCalls, s.asked, s.answered)
			if err := s.answerCalls(ctx, ev.ToolCalls, ev.Deadline); err != nil {
				return err
			}
			s.waitFor(label)
		case client.EventRetry:
			s.endLine()
			fmt.Fprintf(s.info, "(the model call failed: %s; retry %d in %dms)\n", ev.Retry.Error, ev.Retry.Attempt, ev.Retry.DelayMS)
		}
	}
	return s.streamEnded(ctx)
}

// streamEnded explains why the stream stopped.
func (s *chatSession) streamEnded(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.ended && s.streamErr != nil {
		return fmt.Errorf("chat stream: %w", s.streamErr)
	}
	return errors.New("chat stream: ended")
}

// finish ends a turn: the messages the stream has not delivered yet (after
// a reconnection) are read and shown; a failed run is an error.
func (s *chatSession) finish(ctx context.Context, ch client.Chat) error {
	s.work.clear()
	msgs, err := s.c.AllMessages(ctx, s.chatID, s.seen)
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	for _, m := range msgs {
		s.show(m)
	}
	s.endLine()
	if ch.Status == client.StatusError {
		if ch.LastError != nil {
			return &chatFailedError{fmt.Sprintf("the chat failed (%s): %s", ch.LastError.Kind, ch.LastError.Message)}
		}
		return &chatFailedError{"the chat failed"}
	}
	return nil
}

// show prints an assistant message that was not streamed, once, and the
// results of tool calls this person did not answer (the server's tools,
// mostly) as they arrive.
func (s *chatSession) show(m client.Message) {
	s.seen = max(s.seen, m.ID)
	if s.printed[m.ID] {
		return
	}
	s.printed[m.ID] = true
	switch {
	case m.Role == client.RoleTool:
		s.showResults(m)
		return
	case m.IsRepair():
		s.endLine()
		fmt.Fprintln(s.info, "(the answer is not valid against the response format; the model is asked to repair it)")
		return
	case m.Role != client.RoleAssistant:
		return
	}
	if len(m.Parts) == 1 && m.Parts[0].Type == client.PartCompaction {
		s.showCompaction(m.Parts[0])
		return
	}
	if !s.streamed[m.ID] {
		s.write(m.Text())
	}
	s.endLine()
	for _, p := range m.Parts {
		if p.Type == client.PartToolCall {
			s.busy("calling " + p.ToolName)
			break
		}
	}
}

// showResults prints the results of a tool message on the info stream, one
// line each: the tool and the start of its result.
func (s *chatSession) showResults(m client.Message) {
	shown := false
	for _, p := range m.Parts {
		if p.Type != client.PartToolResult || s.answered[p.ToolCallID] {
			continue
		}
		s.endLine()
		if p.IsError {
			fmt.Fprintf(s.info, "tool %s (error): %s\n", p.ToolName, shortResult(p.Output))
		} else {
			fmt.Fprintf(s.info, "tool %s: %s\n", p.ToolName, shortResult(p.Output))
		}
		shown = true
	}
	if shown {
		s.busy("the model is working")
	}
}

// shortResultRunes bounds the view of a tool result.
const shortResultRunes = 100

// shortResult is a tool output on one line: a JSON string as its text,
// anything else as compact JSON, cut to about shortResultRunes.
func shortResult(raw json.RawMessage) string {
	var text string
	if json.Unmarshal(raw, &text) != nil {
		text = compactJSON(raw)
	}
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > shortResultRunes {
		text = string(r[:shortResultRunes]) + "…"
	}
	return text
}

// waitFor shows label (from waitingLabel, taken before the calls were
// asked about), if any.
func (s *chatSession) waitFor(label string) {
	if label != "" {
		s.busy(label)
	}
}

// waitingLabel is what the chat waits for when every one of its calls was
// asked about here already (what is left is for someone else: a decision
// on a call that needs approval, in another client or the web UI, or a
// tool's result), or "" when a call is still to be asked about here.
func waitingLabel(calls []client.ToolCall, asked, answered map[string]bool) string {
	approval, result := false, false
	for _, c := range calls {
		switch {
		case !asked[c.ToolCallID]:
			return ""
		case answered[c.ToolCallID]:
		case c.NeedsApproval():
			approval = true
		default:
			result = true
		}
	}
	switch {
	case approval:
		return "waiting for approval"
	case result:
		return "waiting for tool results"
	}
	return ""
}

// progressLabel is a server-side call's progress report, for the status
// line: "everything_slow: step 3 (3/10)", or a percentage when the total is
// 1 (a fraction), or the bare count when it is unknown.
func progressLabel(p client.Delta) string {
	var amount string
	switch {
	case p.Total == 1:
		amount = fmt.Sprintf("%.0f%%", p.Progress*100)
	case p.Total > 0:
		amount = fmt.Sprintf("%g/%g", p.Progress, p.Total)
	case p.Progress > 0:
		amount = fmt.Sprintf("%g", p.Progress)
	}
	switch {
	case p.Message != "" && amount != "":
		return fmt.Sprintf("%s: %s (%s)", p.ToolName, p.Message, amount)
	case p.Message != "":
		return p.ToolName + ": " + p.Message
	case amount != "":
		return p.ToolName + ": " + amount
	}
	return "calling " + p.ToolName
}

// busy shows that the chat is at work, unless an answer's line is open.
func (s *chatSession) busy(label string) {
	if !s.midLine {
		s.work.start(label)
	}
}

// write prints answer text.
func (s *chatSession) write(text string) {
	if text == "" {
		return
	}
	io.WriteString(s.out, text)
	s.midLine = !strings.HasSuffix(text, "\n")
}

// endLine ends the answer's current line, if any.
func (s *chatSession) endLine() {
	if s.midLine {
		io.WriteString(s.out, "\n")
		s.midLine = false
	}
}

// interrupt stops the chat's run after Ctrl-C.
func (s *chatSession) interrupt() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.endLine()
	if _, err := s.c.Interrupt(ctx, s.chatID); err != nil {
		fmt.Fprintf(s.info, "could not interrupt the chat: %v\n", err)
	}
}
