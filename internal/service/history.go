package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// CreateWithHistory creates the owner's chat, waiting, with history as its
// prior messages (user messages, assistant messages with their text and tool
// calls, tool messages with their results), all in one transaction. It is for
// clients that bring a conversation begun elsewhere, like the
// OpenAI-compatible facade, whose requests carry the whole conversation.
//
// in.Message must be empty: the history takes its place. The history must
// keep the invariant every stored history keeps (chat.CheckHistory with no
// call left open); a breach is a ValidationError of the field "history". The
// chat does not run until StartChat: a caller may subscribe to its events in
// between. It returns the chat and the inserted messages, with their ids.
//
// The chat is created to answer its history, so it is new work: refused
// with a *quota.ExceededError once one of the owner's budgets is reached,
// and with a *quota.CapError when the owner has max_chats chats.
func (s *Service) CreateWithHistory(ctx context.Context, owner string, in NewChat, history []chat.Message) (Created, []chat.Message, error) {
	if len(in.Message) > 0 && string(in.Message) != "null" {
		return Created{}, nil, &chat.ValidationError{Field: "message", Message: "must be empty when a history is given"}
	}
	c, _, err := s.newChatFrom(ctx, owner, in)
	if err != nil {
		return Created{}, nil, err
	}
	msgs, err := s.checkHistory(history)
	if err != nil {
		return Created{}, nil, err
	}
	if err := s.checkBudget(ctx, owner); err != nil {
		return Created{}, nil, fmt.Errorf("create chat with history: %w", err)
	}
	var inserted []chat.Message
	err = s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		if err := s.checkChats(ctx, tx, owner); err != nil {
			return err
		}
		cc := c // the transaction may run fn again: start from the same values each time
		if err := tx.InsertChat(ctx, &cc); err != nil {
			return err
		}
		inserted = make([]chat.Message, 0, len(msgs))
		for _, m := range msgs {
			m.ChatID = cc.ID
			if err := tx.InsertMessage(ctx, &m); err != nil {
				return fmt.Errorf("insert history: %w", err)
			}
			inserted = append(inserted, m)
		}
		c = cc
		n.Feed = append(n.Feed, events.FeedEvent{Kind: events.KindCreated, Chat: c})
		return nil
	})
	if err != nil {
		return Created{}, nil, fmt.Errorf("create chat with history: %w", err)
	}
	return Created{Chat: c, Warnings: s.toolWarnings(c.Tools)}, inserted, nil
}

// checkHistory checks the messages of a history given at creation and
// returns copies of them ready to insert.
func (s *Service) checkHistory(history []chat.Message) ([]chat.Message, error) {
	lim := s.limits()
	out := make([]chat.Message, len(history))
	size := 0
	for i, m := range history {
		field := fmt.Sprintf("history[%d]", i)
		allowed := map[chat.Role][]string{
			chat.RoleUser:      {chat.PartText, chat.PartFile},
			chat.RoleAssistant: {chat.PartText, chat.PartReasoning, chat.PartToolCall},
			chat.RoleTool:      {chat.PartToolResult},
		}[m.Role]
		if allowed == nil {
			return nil, &chat.ValidationError{Field: field + ".role", Message: fmt.Sprintf("%q must be user, assistant or tool", m.Role)}
		}
		if len(m.Parts) == 0 {
			return nil, &chat.ValidationError{Field: field + ".parts", Message: "has no parts"}
		}
		parts := make([]chat.Part, len(m.Parts))
		for j, p := range m.Parts {
			pf := fmt.Sprintf("%s.parts[%d]", field, j)
			if !slices.Contains(allowed, p.Type) {
				return nil, &chat.ValidationError{Field: pf + ".type", Message: fmt.Sprintf("a %s message holds no %q parts", m.Role, p.Type)}
			}
			if strings.ContainsRune(p.Text, 0) {
				return nil, &chat.ValidationError{Field: pf + ".text", Message: "must not contain NUL"}
			}
			if p.Type == chat.PartToolCall && (p.ToolCallID == "" || p.ToolName == "" || !json.Valid(p.Args)) {
				return nil, &chat.ValidationError{Field: pf, Message: "a tool call needs an id, a name and JSON arguments"}
			}
			if p.Type == chat.PartFile && p.URL == "" {
				return nil, &chat.ValidationError{Field: pf + ".url", Message: "a file in a history is given by its URL"}
			}
			if p.Type == chat.PartToolResult && (p.ToolCallID == "" || (len(p.Output) > 0 && !json.Valid(p.Output))) {
				return nil, &chat.ValidationError{Field: pf, Message: "a tool result needs its call's id and a JSON output"}
			}
			size += len(p.Text) + len(p.Args) + len(p.Output)
			if p.Type == chat.PartToolResult {
				// Capped as every result is; what was cut is the server's to say.
				p.Truncated, p.OutputBytes = false, 0
				p = p.CapOutput(s.cfg.Tools.MaxResultBytes)
			}
			parts[j] = p
		}
		out[i] = chat.Message{Role: m.Role, Parts: parts}
	}
	if limit := lim.MaxMessageBytes * max(len(history), 1); size > limit {
		return nil, &chat.ValidationError{Field: "history", Message: fmt.Sprintf("is %d bytes, at most %d allowed", size, limit)}
	}
	if err := chat.CheckHistory(chat.Waiting, out, func(chat.ToolCall) bool { return false }); err != nil {
		return nil, &chat.ValidationError{Field: "history", Message: err.Error()}
	}
	return out, nil
}

// StartChat makes the owner's waiting chat pending, so that it answers its
// history as it stands: its last message must be a user message or the
// results of the last assistant message's calls. It pairs with
// CreateWithHistory: a caller creates the chat, subscribes to its events,
// then starts it, and misses none of its run.
func (s *Service) StartChat(ctx context.Context, owner, id string) (chat.Chat, error) {
	var c chat.Chat
	err := s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		var err error
		if c, err = lockOwned(ctx, tx, owner, id); err != nil {
			return err
		}
		if c.Status != chat.Waiting {
			return &StatusError{ChatID: id, Status: c.Status, Reason: "only a waiting chat can be started"}
		}
		tail, err := tx.LastTurn(ctx, id)
		if err != nil {
			return err
		}
		if len(tail) == 0 {
			first, err := tx.ListMessages(ctx, id, 0, 1)
			if err != nil {
				return fmt.Errorf("read history: %w", err)
			}
			if len(first) == 0 {
				return &StatusError{ChatID: id, Status: c.Status, Reason: "a chat without messages has nothing to answer"}
			}
		} else if tail[len(tail)-1].Role == chat.RoleAssistant {
			return &StatusError{ChatID: id, Status: c.Status, Reason: "the chat's last message is the model's: nothing to answer"}
		}
		before := c.Status
		c, err = tx.TransitionChat(ctx, id, store.Transition{From: before, To: chat.Pending})
		if err != nil {
			return fmt.Errorf("chat %s to pending: %w", id, err)
		}
		n.StatusChanged(before, c)
		return nil
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("start chat %s: %w", id, err)
	}
	return c, nil
}
