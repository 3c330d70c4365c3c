package dbutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// CheckNewChat rejects a chat that InsertChat may not store.
func CheckNewChat(c *chat.Chat) error {
	switch {
	case c.ID == "":
		return errors.New("chat id is empty")
	case c.Owner == "":
		return errors.New("chat owner is empty")
	case c.Model == "":
		return errors.New("chat model is empty")
	case !c.Status.Valid():
		return fmt.Errorf("chat status %q is not a status", c.Status)
	case !chat.CanTransition(chat.New, c.Status):
		return &store.IllegalTransitionError{From: chat.New, To: c.Status}
	}
	return nil
}

// Inserted sets what InsertChat stored of c besides its fields: its
// creation time, version 1, and empty labels and dynamic tools for none.
func Inserted(c *chat.Chat, now time.Time) {
	c.CreatedAt, c.UpdatedAt, c.Version = now, now, 1
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	if c.DynamicTools == nil {
		c.DynamicTools = []chat.DynamicTool{}
	}
}

// InsertRefused explains an INSERT ... WHERE EXISTS (owner) ON CONFLICT
// DO NOTHING that inserted nothing, from whether the key exists (read with
// err): store.ErrExists, else store.ErrNotFound for the owner.
func InsertRefused(what, id, owner string, exists bool, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("insert %s %s: %w", what, id, err)
	case exists:
		return fmt.Errorf("insert %s %s: %w", what, id, store.ErrExists)
	}
	return fmt.Errorf("insert %s %s: owner %s: %w", what, id, owner, store.ErrNotFound)
}

// CheckTransition refuses a status change the state machine forbids.
func CheckTransition(t store.Transition) error {
	if !chat.CanTransition(t.From, t.To) {
		return &store.IllegalTransitionError{From: t.From, To: t.To}
	}
	return nil
}

// StatusConflict explains a conditional status update that matched no
// row, from the chat's status as read then (with err).
func StatusConflict(id string, tr store.Transition, status string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("transition chat %s: %w", id, err)
	}
	if err != nil {
		return fmt.Errorf("transition chat %s %s -> %s: %w", id, tr.From, tr.To, err)
	}
	return &store.StatusConflictError{ChatID: id, Status: chat.Status(status)}
}

// Change returns the SQL literals of a status change the state table allows
// ('pending', 'running'), for a statement that changes statuses by itself
// (acquiring, recovering). It panics on a change the table forbids: stores
// build such statements when the package loads, so a statement that would
// make an illegal change never runs.
func Change(from, to chat.Status) (fromSQL, toSQL string) {
	if !chat.CanTransition(from, to) {
		panic(fmt.Sprintf("illegal status change %s -> %s in a statement", from, to))
	}
	return "'" + string(from) + "'", "'" + string(to) + "'"
}

// ChatJSON is a chat's JSON columns, encoded.
type ChatJSON struct {
	DynamicTools []byte // never null: "[]" when there are none
	Labels       []byte // never null: "{}" when there are none
	LastError    []byte // nil (SQL NULL) when there is no error
	Tools        []byte // nil (SQL NULL) when the chat takes every server-side tool
	Approve      []byte // nil (SQL NULL) when the chat adds no tool to approve
	// ResponseFormat and TurnFormat are nil (SQL NULL) when there is none.
	ResponseFormat, TurnFormat []byte
}

// EncodeChat encodes the JSON columns of c.
func EncodeChat(c *chat.Chat) (ChatJSON, error) {
	var out ChatJSON
	var err error
	if out.DynamicTools, err = EncodeTools(c.DynamicTools); err != nil {
		return out, err
	}
	if out.Labels, err = EncodeLabels(c.Labels); err != nil {
		return out, err
	}
	if out.LastError, err = EncodeNullable(c.LastError); err != nil {
		return out, fmt.Errorf("encode last_error: %w", err)
	}
	if c.Tools != nil {
		if out.Tools, err = json.Marshal(c.Tools); err != nil {
			return out, fmt.Errorf("encode tools: %w", err)
		}
	}
	if len(c.Approve) > 0 {
		if out.Approve, err = json.Marshal(c.Approve); err != nil {
			return out, fmt.Errorf("encode approve: %w", err)
		}
	}
	if out.ResponseFormat, err = EncodeNullable(c.ResponseFormat); err != nil {
		return out, fmt.Errorf("encode response_format: %w", err)
	}
	if out.TurnFormat, err = EncodeNullable(c.TurnFormat); err != nil {
		return out, fmt.Errorf("encode turn_format: %w", err)
	}
	return out, nil
}

// DecodeFormat decodes a nullable response format column (NULL: nil).
func DecodeFormat(b []byte) (*chat.ResponseFormat, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	f := new(chat.ResponseFormat)
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("decode response format: %w", err)
	}
	return f, nil
}

// DecodeFormats fills c's response format and turn format from their
// columns.
func DecodeFormats(c *chat.Chat, format, turn []byte) error {
	var err error
	if c.ResponseFormat, err = DecodeFormat(format); err != nil {
		return fmt.Errorf("chat %s: %w", c.ID, err)
	}
	if c.TurnFormat, err = DecodeFormat(turn); err != nil {
		return fmt.Errorf("chat %s: turn: %w", c.ID, err)
	}
	return nil
}

// EncodeTools encodes dynamic tools; nil becomes "[]".
func EncodeTools(tools []chat.DynamicTool) ([]byte, error) {
	if tools == nil {
		tools = []chat.DynamicTool{}
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return nil, fmt.Errorf("encode dynamic_tools: %w", err)
	}
	return b, nil
}

// EncodeLabels encodes labels; nil becomes "{}".
func EncodeLabels(labels map[string]string) ([]byte, error) {
	if labels == nil {
		labels = map[string]string{}
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return nil, fmt.Errorf("encode labels: %w", err)
	}
	return b, nil
}

// EncodeParts encodes message parts; nil becomes "[]".
func EncodeParts(parts []chat.Part) ([]byte, error) {
	if parts == nil {
		parts = []chat.Part{}
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return nil, fmt.Errorf("encode parts: %w", err)
	}
	return b, nil
}

// MessageJSON is a message's encoded columns.
type MessageJSON struct {
	Parts   []byte // never null: "[]" when there are none
	Usage   []byte // nil (SQL NULL) when there is none
	Through *int64 // compaction_through (see CompactionThrough)
}

// EncodeMessage encodes the columns of m.
func EncodeMessage(m *chat.Message) (MessageJSON, error) {
	var out MessageJSON
	var err error
	if out.Parts, err = EncodeParts(m.Parts); err != nil {
		return out, err
	}
	if out.Usage, err = EncodeNullable(m.Usage); err != nil {
		return out, fmt.Errorf("encode usage: %w", err)
	}
	out.Through = CompactionThrough(m.Parts)
	return out, nil
}

// CompactionThrough is the compaction_through column of a message with
// these parts: the ThroughMessageID of a compaction (chat.IsCompaction),
// nil (SQL NULL) for any other message.
func CompactionThrough(parts []chat.Part) *int64 {
	if !chat.IsCompaction(chat.Message{Parts: parts}) {
		return nil
	}
	through := parts[0].ThroughMessageID
	return &through
}

// EncodeNullable encodes a pointer as JSON, or nil (SQL NULL) for nil.
func EncodeNullable[T any](v *T) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// DecodeChat fills c's JSON fields from their columns; a NULL or empty
// last_error leaves LastError nil, and nil tools or labels become empty.
func DecodeChat(c *chat.Chat, tools, labels, lastError []byte) error {
	// Most chats have neither: skip the decoder for the empty values.
	if string(tools) != "[]" {
		if err := json.Unmarshal(tools, &c.DynamicTools); err != nil {
			return fmt.Errorf("decode dynamic_tools of chat %s: %w", c.ID, err)
		}
	}
	if c.DynamicTools == nil {
		c.DynamicTools = []chat.DynamicTool{}
	}
	if string(labels) != "{}" {
		if err := json.Unmarshal(labels, &c.Labels); err != nil {
			return fmt.Errorf("decode labels of chat %s: %w", c.ID, err)
		}
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.LastError = nil
	if len(lastError) > 0 && string(lastError) != "null" {
		c.LastError = new(chat.ChatError)
		if err := json.Unmarshal(lastError, c.LastError); err != nil {
			return fmt.Errorf("decode last_error of chat %s: %w", c.ID, err)
		}
	}
	return nil
}

// DecodeToolGlobs fills c.Tools and c.Approve from their columns. Tools is
// nil for NULL (every server-side tool), else the globs ([] for none);
// Approve is nil for NULL or none.
func DecodeToolGlobs(c *chat.Chat, tools, approve []byte) error {
	var err error
	if c.Tools, err = decodeGlobs(tools); err != nil {
		return fmt.Errorf("decode tools of chat %s: %w", c.ID, err)
	}
	if c.Approve, err = decodeGlobs(approve); err != nil {
		return fmt.Errorf("decode approve of chat %s: %w", c.ID, err)
	}
	if len(c.Approve) == 0 {
		c.Approve = nil
	}
	return nil
}

func decodeGlobs(b []byte) (chat.ToolGlobs, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	g := chat.ToolGlobs{}
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	return g, nil
}

// DecodeParts decodes message parts; never nil.
func DecodeParts(b []byte) ([]chat.Part, error) {
	parts := []chat.Part{}
	if err := json.Unmarshal(b, &parts); err != nil {
		return nil, fmt.Errorf("decode parts: %w", err)
	}
	if parts == nil {
		parts = []chat.Part{}
	}
	return parts, nil
}

// DecodeUsage decodes a nullable usage column.
func DecodeUsage(b []byte) (*chat.Usage, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	u := new(chat.Usage)
	if err := json.Unmarshal(b, u); err != nil {
		return nil, fmt.Errorf("decode usage: %w", err)
	}
	return u, nil
}
