package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// MaxBodyBytes bounds a request body. A body over it sheds, in this order,
// the pending calls' arguments, the error's message beyond a KB, the
// pending calls themselves and the structured output, and names what it
// shed in data.omitted.
const MaxBodyBytes = 20 * 1024

// maxErrorMessage is what a shed last_error.message keeps.
const maxErrorMessage = 1024

// Body is a request's body: {"type", "timestamp", "data"}.
type Body struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"` // when the change happened
	Data      Data      `json:"data"`
}

// Data is the chat as the change left it, in the shape (and with the field
// names) of the API's Chat object.
type Data struct {
	ID             string               `json:"id"`
	Owner          string               `json:"owner"`
	Title          string               `json:"title"`
	Status         chat.Status          `json:"status"`
	Labels         map[string]string    `json:"labels"`
	RequiredAction *chat.RequiredAction `json:"required_action"`
	LastError      *chat.ChatError      `json:"last_error"`
	Usage          chat.Usage           `json:"usage"`
	// Output is the structured output of the turn a chat.completed event
	// completes (the chat's output then); absent for other events and
	// turns without one.
	Output json.RawMessage `json:"output,omitempty"`
	// Omitted names what was left out to keep the body under MaxBodyBytes:
	// "required_action.tool_calls.args", "last_error.message",
	// "required_action.tool_calls", "output".
	Omitted []string `json:"omitted,omitempty"`
}

// Describer tells a server-side tool's source and description (the tool
// registry), shown on calls that wait for approval.
type Describer interface {
	Describe(name string) (source, description string, ok bool)
}

// bodyReader is what building a body reads.
type bodyReader interface {
	GetChat(ctx context.Context, id string) (chat.Chat, error)
	TurnThrough(ctx context.Context, chatID string, through int64) ([]chat.Message, error)
}

// BuildBody builds an event's body from its snapshot. A requires_action
// chat's required_action is what GET /api/v1/chats/{id} showed right after
// the change: the calls of its last turn as of the event's message
// (store.WebhookEvent.ThroughMessageID) that had no result or decision, as
// client or approval calls by the chat's dynamic tools, with the deadline
// of the snapshot. Of a chat deleted since, it is null.
func BuildBody(ctx context.Context, r bodyReader, tools Describer, ev store.WebhookEvent) ([]byte, error) {
	s := ev.Chat
	d := Data{ID: ev.ChatID, Owner: ev.Owner, Title: s.Title, Status: s.Status, Labels: s.Labels,
		LastError: s.LastError, Usage: s.Usage}
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if s.Status == chat.RequiresAction {
		ra, err := requiredAction(ctx, r, tools, ev)
		if err != nil {
			return nil, err
		}
		d.RequiredAction = ra
	}
	if ev.Type == "chat.completed" && ev.ThroughMessageID > 0 {
		// The turn as of the event: the chat may have gone on since.
		turn, err := r.TurnThrough(ctx, ev.ChatID, ev.ThroughMessageID)
		if err != nil {
			return nil, fmt.Errorf("build body of %s: %w", ev.ID, err)
		}
		d.Output = chat.LastOutput(turn)
	}
	b := Body{Type: ev.Type, Timestamp: ev.CreatedAt, Data: d}
	return encodeWithin(b)
}

func requiredAction(ctx context.Context, r bodyReader, tools Describer, ev store.WebhookEvent) (*chat.RequiredAction, error) {
	c, err := r.GetChat(ctx, ev.ChatID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("build body of %s: %w", ev.ID, err)
	}
	turn, err := r.TurnThrough(ctx, ev.ChatID, ev.ThroughMessageID)
	if err != nil {
		return nil, fmt.Errorf("build body of %s: %w", ev.ID, err)
	}
	ra := &chat.RequiredAction{ToolCalls: chat.PendingActions(turn, c.DynamicTools)}
	if ra.ToolCalls == nil {
		ra.ToolCalls = []chat.ToolCall{}
	}
	for i, call := range ra.ToolCalls {
		if call.Kind == chat.ActionApproval && tools != nil {
			ra.ToolCalls[i].Source, ra.ToolCalls[i].Description, _ = tools.Describe(call.ToolName)
		}
	}
	if ev.Chat.ActionDeadline != nil {
		ra.Deadline = *ev.Chat.ActionDeadline
	}
	return ra, nil
}

// encodeWithin encodes b, shedding what Data.Omitted lists until it fits
// in MaxBodyBytes.
func encodeWithin(b Body) ([]byte, error) {
	sheds := []struct {
		name string
		shed func(d *Data) bool // reports whether it changed anything
	}{
		{"required_action.tool_calls.args", func(d *Data) bool {
			if d.RequiredAction == nil || len(d.RequiredAction.ToolCalls) == 0 {
				return false
			}
			calls := make([]chat.ToolCall, len(d.RequiredAction.ToolCalls))
			for i, c := range d.RequiredAction.ToolCalls {
				c.Args, c.Description = json.RawMessage("null"), ""
				calls[i] = c
			}
			d.RequiredAction = &chat.RequiredAction{ToolCalls: calls, Deadline: d.RequiredAction.Deadline}
			return true
		}},
		{"last_error.message", func(d *Data) bool {
			if d.LastError == nil || len(d.LastError.Message) <= maxErrorMessage {
				return false
			}
			e := *d.LastError
			e.Message = truncateUTF8(e.Message, maxErrorMessage)
			d.LastError = &e
			return true
		}},
		{"required_action.tool_calls", func(d *Data) bool {
			if d.RequiredAction == nil || len(d.RequiredAction.ToolCalls) == 0 {
				return false
			}
			d.RequiredAction = &chat.RequiredAction{ToolCalls: []chat.ToolCall{}, Deadline: d.RequiredAction.Deadline}
			return true
		}},
		{"output", func(d *Data) bool {
			if d.Output == nil {
				return false
			}
			d.Output = nil
			return true
		}},
	}
	for i := 0; ; i++ {
		out, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode webhook body: %w", err)
		}
		if len(out) <= MaxBodyBytes {
			return out, nil
		}
		for i < len(sheds) && !sheds[i].shed(&b.Data) {
			i++
		}
		if i == len(sheds) {
			return nil, fmt.Errorf("webhook body of chat %s is %d bytes even with %v left out; at most %d",
				b.Data.ID, len(out), b.Data.Omitted, MaxBodyBytes)
		}
		b.Data.Omitted = append(b.Data.Omitted, sheds[i].name)
	}
}

// truncateUTF8 cuts s to at most n bytes, on a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
