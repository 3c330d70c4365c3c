// Package aisdk speaks the Vercel AI SDK's UI message stream protocol: it
// maps a chat's stream events (the public shapes of GET
// /api/v1/chats/{id}/stream) to UI message chunks, turns the last message
// of a useChat request into the action it asks of the chat, and renders a
// chat's history as UIMessage values.
package aisdk

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
)

// Chunk is one UI message chunk, encoded as the JSON object of a data frame.
// Its field names are the AI SDK's (uiMessageChunkSchema).
type Chunk map[string]any

// Finish reasons of the finish chunk.
const (
	FinishStop      = "stop"       // the chat is waiting for a message
	FinishToolCalls = "tool-calls" // the chat waits for client tool outputs or approvals
	FinishError     = "error"      // the run failed
	FinishOther     = "other"      // the stream ended for another reason (resync, revoked token)
)

// Event kinds a stream may end with besides the chat's own (internal/api).
const (
	KindResync       = events.KindResync
	KindUnauthorized = "unauthorized"
)

// Mapper turns one run's chat events into chunks. It keeps what it opened
// (the step, the text and reasoning parts, the tool calls streamed so far)
// so that every delta follows its start and every end closes what is open.
// The live stream and a resumed one use the same Mapper.
type Mapper struct {
	messageID string // the start chunk's messageId; "" until known
	started   bool   // start sent
	running   bool   // a non-final status was seen: a final one ends the run
	done      bool
	lastErr   bool // an error chunk was sent: the run ends as failed
	queued    bool // skip everything until the queued user message is in the history

	step      int64             // the message id of the open step, 0 if none
	text      string            // the id of the open text part, "" if none
	reasoning string            // the id of the open reasoning part, "" if none
	parts     int               // parts opened in the step, for ids
	streamed  map[int64]bool    // messages with streamed text or reasoning
	calls     map[int]string    // tool call index -> id, of the open step
	known     map[string]bool   // tool call ids the stream has shown
	denied    map[string]bool   // calls denied: their error result is not shown again
	approval  map[string]bool   // approval requests sent
	names     map[string]string // tool call id -> tool name
	client    map[string]bool   // the chat's dynamic tools: their calls are the client's
}

// NewMapper returns a Mapper whose start chunk carries messageID, the id of
// the assistant UIMessage the run continues ("" to take the id of the run's
// first assistant message), and clientTools the chat's dynamic tools.
func NewMapper(messageID string, clientTools map[string]bool) *Mapper {
	return &Mapper{messageID: messageID, client: clientTools, streamed: map[int64]bool{}, calls: map[int]string{},
		known: map[string]bool{}, denied: map[string]bool{}, approval: map[string]bool{}, names: map[string]string{}}
}

// AfterQueued makes the Mapper skip the events of the run in progress: the
// request's message was queued (or a resumed stream's chat has messages
// queued), and its answer starts once the queued messages enter the
// history.
func (m *Mapper) AfterQueued() { m.queued = true }

// MessageID is the UIMessage id of a parley message.
func MessageID(id int64) string { return "msg-" + strconv.FormatInt(id, 10) }

// Done reports whether the run ended: the finish chunk was produced.
func (m *Mapper) Done() bool { return m.done }

// Event maps one stream event (its kind and its data, as GET
// /api/v1/chats/{id}/stream sends them) to the chunks it stands for.
func (m *Mapper) Event(kind string, data []byte) ([]Chunk, error) {
	if m.done {
		return nil, nil
	}
	if m.queued {
		if kind == events.KindMessage {
			var ev struct {
				Message chat.Message `json:"message"`
			}
			if err := json.Unmarshal(data, &ev); err != nil {
				return nil, fmt.Errorf("aisdk: message event: %w", err)
			}
			if ev.Message.Role == chat.RoleUser && !chat.IsRepair(ev.Message) {
				m.queued, m.running = false, true // its run comes next
			}
		}
		return nil, nil
	}
	var out []Chunk
	emit := func(c Chunk) { out = append(out, c) }
	switch kind {
	case events.KindStatus:
		var ev struct {
			Status chat.Status `json:"status"`
			Chat   *chat.Chat  `json:"chat"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, fmt.Errorf("aisdk: status event: %w", err)
		}
		switch ev.Status {
		case chat.Pending, chat.Running:
			m.running = true
		case chat.Waiting:
			m.end(emit, FinishStop)
		case chat.RequiresAction:
			if ev.Chat != nil && ev.Chat.RequiredAction != nil {
				m.actions(emit, ev.Chat.RequiredAction.ToolCalls)
			}
			m.end(emit, FinishToolCalls)
		case chat.Error:
			if !m.running {
				break
			}
			if ev.Chat != nil && ev.Chat.LastError != nil && !m.lastErr {
				m.begin(emit, 0)
				emit(Chunk{"type": "error", "errorText": ev.Chat.LastError.Message})
			}
			m.end(emit, FinishError)
		}
	case events.KindMessage:
		var ev struct {
			Message chat.Message `json:"message"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, fmt.Errorf("aisdk: message event: %w", err)
		}
		m.message(emit, ev.Message)
	case events.KindPart:
		var ev struct {
			MessageID int64           `json:"message_id"`
			Part      json.RawMessage `json:"part"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, fmt.Errorf("aisdk: part event: %w", err)
		}
		var d events.Delta
		if err := json.Unmarshal(ev.Part, &d); err != nil {
			return nil, fmt.Errorf("aisdk: part event: %w", err)
		}
		if d.Type == "tool-progress" {
			var p events.ToolProgress
			if err := json.Unmarshal(ev.Part, &p); err != nil {
				return nil, fmt.Errorf("aisdk: tool progress: %w", err)
			}
			m.begin(emit, ev.MessageID)
			data := map[string]any{"toolCallId": p.ToolCallID, "toolName": p.ToolName, "progress": p.Progress}
			if p.Total > 0 {
				data["total"] = p.Total
			}
			if p.Message != "" {
				data["message"] = p.Message
			}
			emit(Chunk{"type": "data-tool-progress", "id": p.ToolCallID, "data": data, "transient": true})
			break
		}
		m.delta(emit, ev.MessageID, d)
	case events.KindActionRequired:
		var ev struct {
			ToolCalls []chat.ToolCall `json:"tool_calls"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, fmt.Errorf("aisdk: action_required event: %w", err)
		}
		m.actions(emit, ev.ToolCalls)
	case events.KindError:
		var ev struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, fmt.Errorf("aisdk: error event: %w", err)
		}
		m.begin(emit, 0)
		emit(Chunk{"type": "error", "errorText": ev.Message})
		m.lastErr = true
	case KindResync, KindUnauthorized:
		m.begin(emit, 0)
		why := "the stream fell behind the chat; resume it"
		if kind == KindUnauthorized {
			why = "the token was revoked"
		}
		emit(Chunk{"type": "error", "errorText": why})
		m.end(emit, FinishOther)
	}
	return out, nil
}

// begin sends the start chunk once, taking the id of the message msgID for
// it when the Mapper was given none.
func (m *Mapper) begin(emit func(Chunk), msgID int64) {
	if m.started {
		return
	}
	m.started = true
	if m.messageID == "" && msgID > 0 {
		m.messageID = MessageID(msgID)
	}
	if m.messageID == "" {
		emit(Chunk{"type": "start"})
		return
	}
	emit(Chunk{"type": "start", "messageId": m.messageID})
}

// openStep starts the step of message msgID, finishing another open one.
func (m *Mapper) openStep(emit func(Chunk), msgID int64) {
	m.begin(emit, msgID)
	if m.step == msgID {
		return
	}
	m.closeStep(emit)
	m.step = msgID
	m.parts = 0
	clear(m.calls)
	emit(Chunk{"type": "start-step"})
}

// closeParts ends the open text and reasoning parts.
func (m *Mapper) closeParts(emit func(Chunk)) {
	if m.text != "" {
		emit(Chunk{"type": "text-end", "id": m.text})
		m.text = ""
	}
	if m.reasoning != "" {
		emit(Chunk{"type": "reasoning-end", "id": m.reasoning})
		m.reasoning = ""
	}
}

// closeStep ends the open step, if any.
func (m *Mapper) closeStep(emit func(Chunk)) {
	if m.step == 0 {
		return
	}
	m.closeParts(emit)
	emit(Chunk{"type": "finish-step"})
	m.step = 0
}

// partID is the id of the next text or reasoning part of the open step:
// stable across streams of the same run.
func (m *Mapper) partID(kind string) string {
	m.parts++
	return fmt.Sprintf("%s-%d-%d", kind, m.step, m.parts)
}

// streamPart emits a delta of a text or reasoning part (kind, its open id
// in cur): it ends the other kind's open part first, and starts its own
// when none is open.
func (m *Mapper) streamPart(emit func(Chunk), msgID int64, kind string, cur *string, otherKind string, other *string, text string) {
	if *other != "" {
		emit(Chunk{"type": otherKind + "-end", "id": *other})
		*other = ""
	}
	if *cur == "" {
		*cur = m.partID(kind)
		emit(Chunk{"type": kind + "-start", "id": *cur})
	}
	m.streamed[msgID] = true
	emit(Chunk{"type": kind + "-delta", "id": *cur, "delta": text})
}

func (m *Mapper) delta(emit func(Chunk), msgID int64, d events.Delta) {
	m.openStep(emit, msgID)
	switch d.Type {
	case events.DeltaText:
		m.streamPart(emit, msgID, "text", &m.text, "reasoning", &m.reasoning, d.Text)
	case events.DeltaReasoning:
		m.streamPart(emit, msgID, "reasoning", &m.reasoning, "text", &m.text, d.Text)
	case events.DeltaToolCallStart:
		m.closeParts(emit)
		m.calls[d.Index] = d.ToolCallID
		m.known[d.ToolCallID] = true
		m.names[d.ToolCallID] = d.ToolName
		emit(Chunk{"type": "tool-input-start", "toolCallId": d.ToolCallID, "toolName": d.ToolName, "dynamic": true, "providerExecuted": !m.client[d.ToolName]})
	case events.DeltaToolCallDelta:
		id, ok := m.calls[d.Index]
		if !ok {
			return // a call whose start this stream never had: its input comes with the message
		}
		emit(Chunk{"type": "tool-input-delta", "toolCallId": id, "inputTextDelta": d.Text})
	}
}

// message maps a durable message of the run: an assistant message
// completes its step (text not streamed is sent whole, every call becomes
// available); a tool message carries the calls' outputs; a user message
// (one that was queued) ends the run: streams start after their own. A
// request to repair a structured output is part of the run's answer.
func (m *Mapper) message(emit func(Chunk), msg chat.Message) {
	switch msg.Role {
	case chat.RoleUser:
		if chat.IsRepair(msg) {
			return
		}
		// A queued message entered the history: the run this stream
		// showed is over, and the next one answers another request. Before
		// the stream showed anything, it is one of the queued messages
		// promoted together with the one the stream waited for: their
		// answer is the stream's.
		if m.started {
			m.end(emit, FinishStop)
		}
	case chat.RoleAssistant:
		m.openStep(emit, msg.ID)
		streamed := m.streamed[msg.ID]
		for _, p := range msg.Parts {
			switch p.Type {
			case "text", "reasoning":
				if streamed || p.Text == "" {
					continue
				}
				m.closeParts(emit)
				id := m.partID(p.Type)
				emit(Chunk{"type": p.Type + "-start", "id": id})
				emit(Chunk{"type": p.Type + "-delta", "id": id, "delta": p.Text})
				emit(Chunk{"type": p.Type + "-end", "id": id})
			case "tool-call":
				m.closeParts(emit)
				m.known[p.ToolCallID] = true
				m.names[p.ToolCallID] = p.ToolName
				emit(Chunk{"type": "tool-input-available", "toolCallId": p.ToolCallID, "toolName": p.ToolName,
					"input": rawOr(p.Args, "{}"), "dynamic": true, "providerExecuted": !m.client[p.ToolName]})
			}
		}
		m.closeParts(emit)
		delete(m.streamed, msg.ID)
	case chat.RoleTool:
		for _, p := range msg.Parts {
			m.toolPart(emit, msg.ID, p)
		}
	}
}

// toolPart maps one part of a tool message: a decision or a result.
func (m *Mapper) toolPart(emit func(Chunk), msgID int64, p chat.Part) {
	switch p.Type {
	case "tool-decision":
		if p.Decision != nil && !p.Decision.Approved {
			m.begin(emit, msgID)
			m.denied[p.ToolCallID] = true
			emit(Chunk{"type": "tool-output-denied", "toolCallId": p.ToolCallID})
		}
	case "tool-result":
		if m.denied[p.ToolCallID] {
			return
		}
		m.begin(emit, msgID)
		if p.IsError {
			emit(Chunk{"type": "tool-output-error", "toolCallId": p.ToolCallID, "errorText": errorText(p.Output), "dynamic": true, "providerExecuted": !m.client[p.ToolName]})
			return
		}
		emit(Chunk{"type": "tool-output-available", "toolCallId": p.ToolCallID, "output": rawOr(p.Output, "null"), "dynamic": true, "providerExecuted": !m.client[p.ToolName]})
	}
}

// actions sends an approval request for each call waiting for approval,
// once; client calls were made available with their message.
func (m *Mapper) actions(emit func(Chunk), calls []chat.ToolCall) {
	for _, c := range calls {
		if c.Kind != chat.ActionApproval || m.approval[c.ToolCallID] {
			continue
		}
		m.begin(emit, 0)
		m.approval[c.ToolCallID] = true
		if !m.known[c.ToolCallID] {
			m.known[c.ToolCallID] = true
			emit(Chunk{"type": "tool-input-available", "toolCallId": c.ToolCallID, "toolName": c.ToolName,
				"input": rawOr(c.Args, "{}"), "dynamic": true, "providerExecuted": true})
		}
		emit(Chunk{"type": "tool-approval-request", "approvalId": c.ToolCallID, "toolCallId": c.ToolCallID})
	}
}

// end closes what is open and sends the finish chunk, once the run was seen.
func (m *Mapper) end(emit func(Chunk), reason string) {
	if !m.running && reason != FinishOther {
		return // a status from before the run
	}
	m.begin(emit, 0)
	m.closeStep(emit)
	m.closeParts(emit)
	if reason == FinishStop && m.lastErr {
		reason = FinishError
	}
	emit(Chunk{"type": "finish", "finishReason": reason})
	m.done = true
}

// errorText is a tool error's text: the output itself when it is a JSON
// string, else its JSON.
func errorText(out json.RawMessage) string {
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	if len(out) == 0 {
		return "the tool failed"
	}
	return string(out)
}

func rawOr(v json.RawMessage, def string) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage(def)
	}
	return v
}
