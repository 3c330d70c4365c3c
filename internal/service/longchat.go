package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// The operations of long conversations: compact, edit, regenerate, fork.
// Each keeps the history invariant: nothing they write stands between a
// call and its results, and the messages they replace stay in the
// transcript, superseded.

// NothingToCompactError refuses a compaction of a chat whose history since
// its last compaction is one turn or none: all of it stays verbatim.
type NothingToCompactError struct{ ChatID string }

func (e *NothingToCompactError) Error() string {
	return "nothing to compact: the history since the last compaction is the last turn, which always stays verbatim"
}

// MessageError refuses an operation on a message of a chat: Status is the
// HTTP status it calls for (404: no such message; 400: not one the
// operation takes).
type MessageError struct {
	MessageID int64
	Status    int
	Code      string
	Message   string
}

func (e *MessageError) Error() string { return e.Message }

func messageNotFound(id int64) error {
	return &MessageError{MessageID: id, Status: 404, Code: "message_not_found",
		Message: fmt.Sprintf("message %d is not in the chat's history (or was superseded)", id)}
}

// Compact sets the owner's waiting or error chat pending with a request to
// compact its history: its run summarises everything before the last turn
// and the chat waits again. NothingToCompactError when there is nothing
// before the last turn since the last compaction.
func (s *Service) Compact(ctx context.Context, owner, id string) (chat.Chat, error) {
	var c chat.Chat
	err := s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		var err error
		if c, err = s.lockIdle(ctx, tx, owner, id, "compacted"); err != nil {
			return err
		}
		history, err := historyFromCompaction(ctx, tx, id)
		if err != nil {
			return err
		}
		if _, live := chat.SplitAtSummary(history); chat.CompactionCut(live, 0) == 0 {
			return &NothingToCompactError{ChatID: id}
		}
		before := c.Status
		if c, err = tx.TransitionChat(ctx, id, store.Transition{From: before, To: chat.Pending, Compact: true}); err != nil {
			return fmt.Errorf("chat %s to pending: %w", id, err)
		}
		n.StatusChanged(before, c)
		return nil
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("compact chat %s: %w", id, err)
	}
	return c, nil
}

// EditMessage writes a new version of a user message of the owner's
// waiting or error chat: the message and every one after it are
// superseded (kept, with what they followed: MessageVersions), the new
// version is appended in its place, and the chat is set pending to answer
// it.
func (s *Service) EditMessage(ctx context.Context, owner, id string, msgID int64, content json.RawMessage) (chat.Chat, error) {
	parts, err := chat.ParseContent(content, s.limits())
	if err != nil {
		return chat.Chat{}, err
	}
	if err := s.resolveFiles(ctx, owner, "content", parts); err != nil {
		return chat.Chat{}, err
	}
	var c chat.Chat
	err = s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		var err error
		if c, err = s.lockIdle(ctx, tx, owner, id, "edited"); err != nil {
			return err
		}
		if err := s.checkInputs(c.Model, "content", parts); err != nil {
			return err
		}
		page, err := tx.ListMessages(ctx, id, msgID-1, 1)
		if err != nil {
			return err
		}
		if len(page) == 0 || page[0].ID != msgID {
			return messageNotFound(msgID)
		}
		if page[0].Role != chat.RoleUser || chat.IsRepair(page[0]) {
			return &MessageError{MessageID: msgID, Status: 400, Code: "not_a_user_message",
				Message: fmt.Sprintf("message %d is a %s message; only a person's user message can be edited (regenerate replaces an answer)", msgID, roleOf(page[0]))}
		}
		history, err := historyFromCompaction(ctx, tx, id)
		if err != nil {
			return err
		}
		edited := chat.Message{ChatID: id, Role: chat.RoleUser, Parts: parts}
		return s.rerun(ctx, tx, n, &c, history, msgID-1, &edited)
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("edit message %d of chat %s: %w", msgID, id, err)
	}
	return c, nil
}

// Regenerate supersedes everything after the last user message of the
// owner's waiting or error chat and sets it pending to answer that message
// again.
func (s *Service) Regenerate(ctx context.Context, owner, id string) (chat.Chat, error) {
	var c chat.Chat
	err := s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		var err error
		if c, err = s.lockIdle(ctx, tx, owner, id, "regenerated"); err != nil {
			return err
		}
		// The last user message is always after the newest compaction's
		// cut: a compaction keeps the last turn.
		history, err := historyFromCompaction(ctx, tx, id)
		if err != nil {
			return err
		}
		var last int64
		for _, m := range history {
			if m.Role == chat.RoleUser && !chat.IsRepair(m) {
				last = m.ID // a person's: a repair request is part of the answer
			}
		}
		if last == 0 {
			return &StatusError{ChatID: id, Status: c.Status, Reason: "the chat has no user message to answer again"}
		}
		return s.rerun(ctx, tx, n, &c, history, last, nil)
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("regenerate chat %s: %w", id, err)
	}
	return c, nil
}

// rerun supersedes the messages of c after message at (an edit: the one
// before the edited message; a regeneration: the user message answered
// again), appends edited if given (an edit's new version), keeps the
// newest compaction (history is c's from it on) if it summarises only
// messages up to at, and sets the chat pending to answer again.
func (s *Service) rerun(ctx context.Context, tx store.Tx, n *events.Notice, c *chat.Chat, history []chat.Message, at int64, edited *chat.Message) error {
	var keep *chat.Message
	for _, m := range history {
		if chat.IsCompaction(m) && m.ID > at && m.Parts[0].ThroughMessageID <= at {
			keep = &m
		}
	}
	if _, err := tx.SupersedeAfter(ctx, c.ID, at); err != nil {
		return fmt.Errorf("supersede the messages after %d: %w", at, err)
	}
	n.ChatEvent(c.ID, events.ChatEvent{Kind: events.KindHistory, SupersededAfter: at})
	if edited != nil {
		if err := tx.InsertMessage(ctx, edited); err != nil {
			return fmt.Errorf("write the edited message: %w", err)
		}
		n.Message(*edited)
	}
	if keep != nil {
		// Still true of what stays: the summary is written again after it.
		m := chat.Message{ChatID: c.ID, Role: keep.Role, Parts: keep.Parts}
		if err := tx.InsertMessage(ctx, &m); err != nil {
			return fmt.Errorf("keep the compaction: %w", err)
		}
		n.Message(m)
	}
	before := c.Status
	after, err := tx.TransitionChat(ctx, c.ID, store.Transition{From: before, To: chat.Pending})
	if err != nil {
		return fmt.Errorf("chat %s to pending: %w", c.ID, err)
	}
	*c = after
	n.StatusChanged(before, after)
	return nil
}

// Fork creates a chat of the owner like their chat id (model, system
// prompt, tool selection, dynamic tools, labels but chat.ConversationLabels,
// with the label forked_from) holding a copy of its history up to and
// including the message at: pending when that is a user message, to
// answer it, else waiting. The original is not changed. A fork point between a tool call
// and its results is a MessageError (400). An owner with max_chats chats
// gets a *quota.CapError. A fork that answers its last message is not
// refused for the owner's budget: its run stops before the model call, in
// error with kind spend_limit, and retry goes on once the budget allows.
func (s *Service) Fork(ctx context.Context, owner, id string, at int64) (chat.Chat, error) {
	newID, err := uuid.NewV7()
	if err != nil {
		return chat.Chat{}, fmt.Errorf("new chat id: %w", err)
	}
	var fork chat.Chat
	err = s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		src, err := lockOwned(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		var prefix []chat.Message
		errStop := errors.New("past the fork point")
		err = store.ForEachMessage(ctx, tx, id, 0, func(m chat.Message) error {
			if m.ID > at {
				return errStop
			}
			prefix = append(prefix, m)
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		if len(prefix) == 0 || prefix[len(prefix)-1].ID != at {
			return messageNotFound(at)
		}
		if next, err := tx.ListMessages(ctx, id, at, 1); err != nil {
			return err
		} else if len(chat.UnresolvedCalls(prefix)) > 0 || (len(next) == 1 && chat.SplitsStep(append(prefix, next[0]), len(prefix)-1)) {
			return &MessageError{MessageID: at, Status: 400, Code: "fork_inside_step",
				Message: fmt.Sprintf("message %d is between a tool call and its results; fork at the step's last tool message or at another message", at)}
		}
		if err := s.checkChats(ctx, tx, owner); err != nil {
			return err
		}
		fork = chat.Chat{ID: newID.String(), Owner: owner, Title: src.Title, Model: src.Model, SystemPrompt: src.SystemPrompt,
			Status: chat.Waiting, DynamicTools: src.DynamicTools, Tools: src.Tools, Approve: src.Approve,
			Labels: maps.Clone(src.Labels), ToolResultTimeout: src.ToolResultTimeout,
			Agent: src.Agent, AgentVersion: src.AgentVersion, MaxSteps: src.MaxSteps,
			ResponseFormat: src.ResponseFormat}
		if fork.Labels == nil {
			fork.Labels = map[string]string{}
		}
		for _, k := range chat.ConversationLabels {
			delete(fork.Labels, k) // the app's conversation stays with the original
		}
		fork.Labels[chat.LabelForkedFrom] = src.ID
		if prefix[len(prefix)-1].Role == chat.RoleUser {
			fork.Status = chat.Pending
		}
		if err := tx.InsertChat(ctx, &fork); err != nil {
			return err
		}
		ids := map[int64]int64{} // the original's message ids -> the copies'
		for _, m := range prefix {
			cp := chat.Message{ChatID: fork.ID, Role: m.Role, Parts: m.Parts, Usage: m.Usage}
			if chat.IsCompaction(m) {
				p := m.Parts[0]
				p.ThroughMessageID = ids[p.ThroughMessageID]
				cp.Parts = []chat.Part{p}
			}
			if err := tx.InsertMessage(ctx, &cp); err != nil {
				return fmt.Errorf("copy message %d: %w", m.ID, err)
			}
			ids[m.ID] = cp.ID
		}
		n.Feed = append(n.Feed, events.FeedEvent{Kind: events.KindCreated, Chat: fork})
		n.Wake = fork.Status == chat.Pending
		return nil
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("fork chat %s at message %d: %w", id, at, err)
	}
	return fork, nil
}

// MessageVersions returns the versions of message msgID of the owner's
// chat id, oldest first (store.Reader.MessageVersions): the message's
// earlier and later versions an edit or a regeneration wrote, the one in
// the history among them.
func (s *Service) MessageVersions(ctx context.Context, owner, id string, msgID int64) ([]chat.Message, error) {
	if _, err := s.owned(ctx, owner, id); err != nil {
		return nil, err
	}
	msgs, err := s.st.MessageVersions(ctx, id, msgID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &MessageError{MessageID: msgID, Status: 404, Code: "message_not_found",
			Message: fmt.Sprintf("message %d is not in the chat", msgID)}
	}
	if err != nil {
		return nil, fmt.Errorf("versions of message %d of chat %s: %w", msgID, id, err)
	}
	return msgs, nil
}

// ListEveryMessage is ListMessages with the superseded messages among the
// others.
func (s *Service) ListEveryMessage(ctx context.Context, owner, id string, after int64, limit int) ([]chat.Message, error) {
	if _, err := s.owned(ctx, owner, id); err != nil {
		return nil, err
	}
	msgs, err := s.st.ListEveryMessage(ctx, id, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list messages of %s: %w", id, err)
	}
	return msgs, nil
}

// lockIdle locks the owner's chat for an operation (what is done, for the
// error) that takes a waiting or error chat with nothing queued.
func (s *Service) lockIdle(ctx context.Context, tx store.Tx, owner, id, done string) (chat.Chat, error) {
	c, err := lockOwned(ctx, tx, owner, id)
	if err != nil {
		return chat.Chat{}, err
	}
	if c.Status != chat.Waiting && c.Status != chat.Error {
		return chat.Chat{}, &StatusError{ChatID: id, Status: c.Status, Reason: "only a waiting chat or one in error can be " + done}
	}
	q, err := tx.ListQueued(ctx, id)
	if err != nil {
		return chat.Chat{}, err
	}
	if len(q) > 0 {
		return chat.Chat{}, &StatusError{ChatID: id, Status: c.Status, Reason: "messages are queued; the chat can be " + done + " once they are answered"}
	}
	return c, nil
}

// historyFromCompaction reads the chat's history from its newest compaction on
// (store.Reader.SinceCompaction), all of it.
func historyFromCompaction(ctx context.Context, r store.Reader, id string) ([]chat.Message, error) {
	byChat, err := r.SinceCompaction(ctx, []string{id}, store.MaxPageSize)
	if err != nil {
		return nil, fmt.Errorf("read the history of %s: %w", id, err)
	}
	msgs := byChat[id]
	if len(msgs) < store.MaxPageSize {
		return msgs, nil
	}
	err = store.ForEachMessage(ctx, r, id, msgs[len(msgs)-1].ID, func(m chat.Message) error {
		msgs = append(msgs, m)
		return nil
	})
	return msgs, err
}

// withContext sets c.Context from the chat's last turn, or its history
// since its newest compaction, and its model's window; it stays nil when
// the window is unknown.
func (s *Service) withContext(ctx context.Context, c *chat.Chat, lastTurn []chat.Message) error {
	m, ok := s.cfg.FindModel(c.Model)
	if !ok || m.Window() <= 0 {
		return nil
	}
	// The last turn (store.Reader.LastTurn) is enough when it starts with
	// an answer that reported its tokens (a compaction after it would
	// start the turn instead).
	history := lastTurn
	var err error
	if len(history) == 0 || chat.IsCompaction(history[0]) || history[0].Usage == nil || history[0].Usage.InputTokens == 0 {
		if history, err = historyFromCompaction(ctx, s.st, c.ID); err != nil {
			return err
		}
	}
	c.Context = chat.ContextOf(chat.ContextTokens(history, chat.EstimateText(c.SystemPrompt)), m.Window())
	return nil
}

// roleOf names who wrote m, for errors: its role, or "repair request" for
// the user messages parley writes to repair a structured output.
func roleOf(m chat.Message) string {
	if chat.IsRepair(m) {
		return "repair request"
	}
	return string(m.Role)
}
