package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// Bounds of a chat's tool_result_timeout.
const (
	MinToolResultTimeout = time.Second
	MaxToolResultTimeout = 24 * time.Hour
)

// NewChat is what a client may set when it creates a chat; it is also the
// JSON body of POST /api/v1/chats.
type NewChat struct {
	Model        string             `json:"model"`
	SystemPrompt string             `json:"system_prompt"`
	Title        string             `json:"title"`
	Labels       map[string]string  `json:"labels"`
	Message      json.RawMessage    `json:"message"`
	DynamicTools []chat.DynamicTool `json:"dynamic_tools"`
	// Tools narrows the server-side tools offered to the model to those a
	// glob matches; nil offers every one.
	Tools chat.ToolGlobs `json:"tools"`
	// Approve names server-side tools whose calls wait for a person's
	// decision in this chat, on top of those the server's policy requires.
	Approve chat.ToolGlobs `json:"approve"`
	// ToolResultTimeout is a Go duration ("10m"); "" means the server's default.
	ToolResultTimeout string `json:"tool_result_timeout"`
	// Agent names a stored agent the chat starts from: its current version
	// gives every field the request leaves out.
	Agent string `json:"agent"`
	// ResponseFormat asks each turn's final answer as JSON valid against a
	// schema (structured output); nil leaves the agent's, or free text.
	ResponseFormat *chat.ResponseFormat `json:"response_format"`
}

// Created is a chat just created, with what the server noticed about the
// request without refusing it.
type Created struct {
	Chat chat.Chat
	// Warnings are for the client's attention, like a glob of the chat's
	// tools that matches no server-side tool now; nil when there is none.
	Warnings []string
}

// CreateChat validates in and creates the owner's chat: waiting, or pending
// with its first user message when in has one. An owner with max_chats
// chats gets a *quota.CapError; a first message, which is new work, gets a
// *quota.ExceededError once one of the owner's budgets is reached. Refused,
// it creates nothing.
func (s *Service) CreateChat(ctx context.Context, owner string, in NewChat) (chat.Chat, error) {
	c, err := s.Create(ctx, owner, in)
	return c.Chat, err
}

// Create is CreateChat, and it also returns the request's warnings.
func (s *Service) Create(ctx context.Context, owner string, in NewChat) (Created, error) {
	c, first, err := s.newChatFrom(ctx, owner, in)
	if err != nil {
		return Created{}, err
	}
	if first != nil {
		if err := s.resolveFiles(ctx, owner, "message", first); err != nil {
			return Created{}, err
		}
		if err := s.checkInputs(c.Model, "message", first); err != nil {
			return Created{}, err
		}
		if c.Title == "" && in.Title == "" {
			c.Title = chat.FallbackTitle(first, s.limits().MaxTitleBytes) // a file alone: its name
		}
		if err := s.checkBudget(ctx, owner); err != nil {
			return Created{}, fmt.Errorf("create chat: %w", err)
		}
	}
	err = s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		if err := s.checkChats(ctx, tx, owner); err != nil {
			return err
		}
		cc := c // the transaction may run fn again: start from the same values each time
		if err := tx.InsertChat(ctx, &cc); err != nil {
			return err
		}
		if first != nil {
			m := chat.Message{ChatID: cc.ID, Role: chat.RoleUser, Parts: first}
			if err := tx.InsertMessage(ctx, &m); err != nil {
				return err
			}
		}
		c = cc
		n.Feed = append(n.Feed, events.FeedEvent{Kind: events.KindCreated, Chat: c})
		n.Wake = c.Status == chat.Pending
		return nil
	})
	if err != nil {
		return Created{}, fmt.Errorf("create chat: %w", err)
	}
	return Created{Chat: c, Warnings: s.toolWarnings(c.Tools)}, nil
}

// toolWarnings names the globs of a chat's tools that match no server-side
// tool now. Such a glob is kept: a tool source may be reconnecting, or may
// offer the tool later.
func (s *Service) toolWarnings(globs chat.ToolGlobs) []string {
	if len(globs) == 0 {
		return nil
	}
	var names []string
	if s.tools != nil {
		names = s.tools.Names()
	}
	var out []string
	for _, i := range globs.Unmatched(names) {
		out = append(out, fmt.Sprintf("tools[%d] %q matches no server-side tool now", i, globs[i]))
	}
	return out
}

// newChatFrom is newChat after the request's agent, if it names one, has
// given it the fields it leaves out; the chat names the agent's version.
func (s *Service) newChatFrom(ctx context.Context, owner string, in NewChat) (chat.Chat, []chat.Part, error) {
	var from agent.Agent
	if in.Agent != "" {
		var err error
		if from, err = s.fromAgent(ctx, owner, &in); err != nil {
			return chat.Chat{}, nil, err
		}
	}
	c, first, err := s.newChat(owner, in)
	if err == nil && in.Agent != "" {
		c.Agent, c.AgentVersion, c.MaxSteps = from.Name, from.Version, from.Limits.MaxSteps
	}
	return c, first, err
}

// newChat checks a creation request and builds the chat and its first
// message's parts (nil without one).
func (s *Service) newChat(owner string, in NewChat) (chat.Chat, []chat.Part, error) {
	lim := s.limits()
	model := in.Model
	if model == "" {
		model = s.cfg.DefaultModel
	}
	if _, ok := s.cfg.FindModel(model); !ok {
		known := make([]string, len(s.cfg.Models))
		for i, m := range s.cfg.Models {
			known[i] = m.Name
		}
		return chat.Chat{}, nil, &UnknownModelError{Model: model, Known: known}
	}
	if err := checkText("system_prompt", in.SystemPrompt, lim.MaxSystemPrompt, true); err != nil {
		return chat.Chat{}, nil, err
	}
	if err := checkText("title", in.Title, lim.MaxTitleBytes, true); err != nil {
		return chat.Chat{}, nil, err
	}
	if err := chat.ValidateLabels(in.Labels, lim); err != nil {
		return chat.Chat{}, nil, err
	}
	if err := chat.ValidateDynamicTools(in.DynamicTools, s.isServerTool, lim); err != nil {
		return chat.Chat{}, nil, err
	}
	if err := in.Tools.Validate("tools", lim); err != nil {
		return chat.Chat{}, nil, err
	}
	if err := in.Approve.Validate("approve", lim); err != nil {
		return chat.Chat{}, nil, err
	}
	if len(in.Approve) == 0 {
		in.Approve = nil // none added: shown as null, as stored
	}
	var timeout time.Duration
	if in.ToolResultTimeout != "" {
		d, err := time.ParseDuration(in.ToolResultTimeout)
		if err != nil || d < MinToolResultTimeout || d > MaxToolResultTimeout {
			return chat.Chat{}, nil, &chat.ValidationError{Field: "tool_result_timeout",
				Message: fmt.Sprintf("%q must be a duration (like 90s or 10m) between %s and %s", in.ToolResultTimeout, MinToolResultTimeout, MaxToolResultTimeout)}
		}
		timeout = d
	}
	format, err := chatFormat(in.ResponseFormat)
	if err != nil {
		return chat.Chat{}, nil, err
	}
	var first []chat.Part
	if len(in.Message) > 0 && string(in.Message) != "null" {
		parts, err := chat.ParseContent(in.Message, lim)
		if err != nil {
			return chat.Chat{}, nil, renameField(err, "content", "message")
		}
		first = parts
	}
	id, err := uuid.NewV7()
	if err != nil {
		return chat.Chat{}, nil, fmt.Errorf("new chat id: %w", err)
	}
	labels := in.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	tools := in.DynamicTools
	if tools == nil {
		tools = []chat.DynamicTool{}
	}
	for i := range tools {
		if !tools[i].HasOutputSchema() {
			tools[i].OutputSchema = nil // "output_schema": null is none, shown as absent
		}
	}
	c := chat.Chat{
		ID:                id.String(),
		Owner:             owner,
		Title:             in.Title,
		Model:             model,
		SystemPrompt:      in.SystemPrompt,
		Status:            chat.Waiting,
		DynamicTools:      tools,
		Tools:             in.Tools,
		Approve:           in.Approve,
		Labels:            labels,
		ToolResultTimeout: timeout,
		ResponseFormat:    format,
	}
	if first != nil {
		c.Status = chat.Pending
		if c.Title == "" {
			c.Title = chat.FallbackTitle(first, lim.MaxTitleBytes)
		}
	}
	return c, first, nil
}

// chatFormat checks the response format a chat is created with and
// returns the one it keeps: nil for none or {"type": "text"}.
func chatFormat(f *chat.ResponseFormat) (*chat.ResponseFormat, error) {
	if f == nil {
		return nil, nil
	}
	out := *f
	if err := out.Check("response_format"); err != nil {
		return nil, err
	}
	if out.Output() == nil {
		return nil, nil
	}
	return &out, nil
}

// checkText checks a free-text field's size and encoding; unless allowEmpty,
// a value that is only white space is refused.
func checkText(field, v string, maxBytes int, allowEmpty bool) error {
	switch {
	case !utf8.ValidString(v):
		return &chat.ValidationError{Field: field, Message: "must be valid UTF-8"}
	case len(v) > maxBytes:
		return &chat.ValidationError{Field: field, Message: fmt.Sprintf("is %d bytes, at most %d allowed", len(v), maxBytes)}
	case !allowEmpty && strings.TrimSpace(v) == "":
		return &chat.ValidationError{Field: field, Message: "must not be empty"}
	}
	return nil
}

// renameField rewrites the field of a validation error that starts with
// from, so errors name the request's own field.
func renameField(err error, from, to string) error {
	if ve, ok := err.(*chat.ValidationError); ok && strings.HasPrefix(ve.Field, from) {
		return &chat.ValidationError{Field: to + strings.TrimPrefix(ve.Field, from), Message: ve.Message}
	}
	return err
}

// isServerTool reports a server-side tool's name.
func (s *Service) isServerTool(name string) bool { return s.tools != nil && s.tools.Has(name) }
