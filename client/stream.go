package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Chat stream event kinds (GET /api/v1/chats/{id}/stream).
const (
	EventStatus         = "status"
	EventMessage        = "message"
	EventPart           = "part"
	EventActionRequired = "action_required"
	EventRetry          = "retry"
	EventError          = "error"
	// EventHistory follows an edit or a regeneration: the messages after
	// SupersededAfter were superseded (drop them from view). What replaces
	// them follows as message events: an edit's new version of the message
	// (a message of its own, with a new id), then the new answer.
	EventHistory = "history"
)

// Delta types of part events.
const (
	DeltaText          = "text-delta"
	DeltaReasoning     = "reasoning-delta"
	DeltaToolCallStart = "tool-call-start"
	DeltaToolCallDelta = "tool-call-delta"
	// DeltaToolProgress is a progress report of a server-side tool call in
	// flight (an MCP server's notifications/progress); MessageID is the
	// assistant message that made the call. It is not kept: a reconnection
	// does not repeat it.
	DeltaToolProgress = "tool-progress"
)

// ChatEvent is one event of a chat's stream; the fields of its Kind are set.
type ChatEvent struct {
	Kind string

	// status: the chat's status, and the chat, after a change. Every
	// connection starts with the current status (Initial set), followed by
	// the durable messages after the cursor: after a reconnection, an
	// Initial status may be newer than the messages that follow it.
	Status  string
	Chat    *Chat
	Initial bool

	// message: a durable message; the stream's cursor moves to its id.
	Message *Message

	// part: a live piece of the assistant message MessageID in progress.
	MessageID int64
	Part      *Delta

	// action_required: the dynamic tool calls the chat waits for.
	ToolCalls []ToolCall
	Deadline  time.Time

	// retry: the model call is retried.
	Retry *RetryInfo

	// error: the run failed (the chat's status becomes "error").
	Error *ChatError

	// history: the id after which the messages were superseded (the
	// cursor does not move).
	SupersededAfter int64

	// Data is the event's JSON, for kinds this client does not know.
	Data json.RawMessage
}

// Delta is one streamed piece of an assistant message in progress.
type Delta struct {
	Type       string `json:"type"`
	Text       string `json:"text,omitempty"`         // text, reasoning and argument deltas
	Index      int    `json:"index"`                  // tool calls: position in the answer
	ToolCallID string `json:"tool_call_id,omitempty"` // tool-call-start, tool-progress
	ToolName   string `json:"tool_name,omitempty"`    // tool-call-start, tool-progress

	// tool-progress: how far the call is, of Total (0 when unknown), and the
	// tool's message, if any.
	Progress float64 `json:"progress,omitempty"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// RetryInfo is the payload of a retry event.
type RetryInfo struct {
	Attempt int    `json:"attempt"`
	DelayMS int64  `json:"delay_ms"`
	Error   string `json:"error"`
}

// ChatStream reads one chat's events. It reconnects on its own when the
// connection drops or the server asks it to resync, resuming after the last
// durable message it delivered, and it drops the part events a reconnection
// repeats. Use it like a bufio.Scanner:
//
//	for s.Next() {
//		ev := s.Event()
//		...
//	}
//	if err := s.Err(); err != nil { ... }
//
// Next and Event belong to one goroutine; Close may be called from any.
type ChatStream struct {
	conn *sseConn

	cursor int64         // the last durable message delivered
	parts  map[int64]int // message id -> part events delivered
	skip   map[int64]int // message id -> part events a reconnection repeats
	fresh  bool          // no event read yet from the current connection
	ev     ChatEvent
	err    error
	done   bool
}

// Stream opens the event stream of a chat, starting after the message id
// after (0: from the start). The first connection is made here: a chat that
// does not exist is an *APIError (404). Close the stream when done.
func (c *Client) Stream(ctx context.Context, chatID string, after int64) (*ChatStream, error) {
	s := &ChatStream{cursor: after, parts: map[int64]int{}, fresh: true}
	s.conn = newSSEConn(ctx, c, chatPath(chatID, "stream"), s.query)
	if err := s.conn.connect(); err != nil {
		s.conn.end(err)
		return nil, err
	}
	return s, nil
}

func (s *ChatStream) query() url.Values {
	q := url.Values{}
	if s.cursor > 0 {
		q.Set("after", strconv.FormatInt(s.cursor, 10))
	}
	return q
}

// Cursor is the id of the last durable message the stream delivered (or
// the after it started with): where a new stream would resume.
func (s *ChatStream) Cursor() int64 { return s.cursor }

// Next waits for the next event and reports whether there is one. It is
// false once the stream is closed, its context ends, or the server refuses
// to reconnect (see Err).
func (s *ChatStream) Next() bool {
	for !s.done {
		raw, err := s.conn.next()
		if err != nil {
			s.reconnect()
			continue
		}
		if raw.Event == FeedResync { // the stream's resync has the feed's name
			s.reconnect()
			continue
		}
		fresh := s.fresh
		s.fresh = false
		ev, ok, err := s.decode(raw)
		ev.Initial = fresh && ev.Kind == EventStatus
		if err != nil {
			s.fail(err)
			return false
		}
		if ok {
			s.ev = ev
			return true
		}
	}
	return false
}

// reconnect opens a new connection after the cursor; the part events of
// the message in progress start again from its first, so the ones already
// delivered are skipped.
func (s *ChatStream) reconnect() {
	if err := s.conn.reconnect(); err != nil {
		s.fail(err)
		return
	}
	s.fresh = true
	s.skip = make(map[int64]int, len(s.parts))
	for id, n := range s.parts {
		s.skip[id] = n
	}
}

// decode turns a raw event into a ChatEvent; ok is false for an event that
// is not delivered (a repeat).
func (s *ChatStream) decode(raw sseEvent) (ev ChatEvent, ok bool, err error) {
	ev = ChatEvent{Kind: raw.Event, Data: json.RawMessage(raw.Data)}
	var body struct {
		Status    string     `json:"status"`
		Chat      *Chat      `json:"chat"`
		Message   *Message   `json:"message"`
		MessageID int64      `json:"message_id"`
		Part      *Delta     `json:"part"`
		ToolCalls []ToolCall `json:"tool_calls"`
		Deadline  time.Time  `json:"deadline"`

		SupersededAfter int64 `json:"superseded_after"`
	}
	switch raw.Event {
	case EventRetry:
		ev.Retry = &RetryInfo{}
		err = json.Unmarshal(ev.Data, ev.Retry)
	case EventError:
		ev.Error = &ChatError{}
		err = json.Unmarshal(ev.Data, ev.Error)
	default:
		err = json.Unmarshal(ev.Data, &body)
	}
	if err != nil {
		return ev, false, fmt.Errorf("chat stream: decode %s event: %w", raw.Event, err)
	}
	switch raw.Event {
	case EventStatus:
		ev.Status, ev.Chat = body.Status, body.Chat
	case EventMessage:
		if body.Message == nil {
			return ev, false, fmt.Errorf("chat stream: message event without a message")
		}
		if body.Message.ID <= s.cursor {
			return ev, false, nil
		}
		s.cursor = body.Message.ID
		delete(s.parts, body.Message.ID)
		delete(s.skip, body.Message.ID)
		ev.Message = body.Message
	case EventPart:
		if body.Part != nil && body.Part.Type == DeltaToolProgress {
			// The calling message is durable already, and a report is
			// never repeated: it is neither behind the cursor nor counted.
			ev.MessageID, ev.Part = body.MessageID, body.Part
			return ev, true, nil
		}
		if body.Part == nil || body.MessageID <= s.cursor {
			return ev, false, nil
		}
		if s.skip[body.MessageID] > 0 {
			s.skip[body.MessageID]--
			return ev, false, nil
		}
		s.parts[body.MessageID]++
		ev.MessageID, ev.Part = body.MessageID, body.Part
	case EventActionRequired:
		ev.ToolCalls, ev.Deadline = body.ToolCalls, body.Deadline
	case EventHistory:
		ev.SupersededAfter = body.SupersededAfter
	}
	return ev, true, nil
}

// Event is the event Next found.
func (s *ChatStream) Event() ChatEvent { return s.ev }

// Err is why the stream ended: nil after Close, the context's error when it
// ended, or the server's refusal to reconnect (an *APIError, like a 404 for
// a deleted chat).
func (s *ChatStream) Err() error { return s.err }

func (s *ChatStream) fail(err error) { s.done, s.err = true, s.conn.end(err) }

// Close ends the stream; a Next blocked in another goroutine returns false.
func (s *ChatStream) Close() error {
	s.conn.shutdown()
	return nil
}
