// Package invariant checks, after a test that ran chats, the invariant every
// chat's history keeps (chat.CheckHistory): each tool call has exactly one
// result, right after its assistant message and in call order, and only the
// calls a requires_action chat waits for may be open; and every superseded
// message names the message it followed (its versions stay reachable). The
// test helpers that open stores (sqlitetest, pgtest) run it when the test
// ends.
package invariant

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// Store is what the check reads: every chat id, then each chat and its
// history.
type Store interface {
	store.Reader
	ChatIDs(ctx context.Context) ([]string, error)
}

// Check fails t for every chat of st whose history breaks the invariant.
func Check(t testing.TB, st Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids, err := st.ChatIDs(ctx)
	if err != nil && strings.Contains(err.Error(), "closed") {
		// The test closed the store itself (a readiness check of a dead
		// database): there is nothing to read.
		t.Logf("invariant check skipped: %v", err)
		return
	}
	if err != nil {
		t.Errorf("invariant check: %v", err)
		return
	}
	for _, id := range ids {
		c, err := st.GetChat(ctx, id)
		if err != nil {
			t.Errorf("invariant check: %v", err)
			continue
		}
		var msgs []chat.Message
		err = store.ForEachMessage(ctx, st, id, 0, func(m chat.Message) error {
			msgs = append(msgs, m)
			return nil
		})
		if err != nil {
			t.Errorf("invariant check: %v", err)
			continue
		}
		if err := chat.CheckHistory(c.Status, msgs, MayWait(c, msgs)); err != nil {
			t.Errorf("invariant broken in chat %s (%s):\n%v", id, c.Status, err)
		}
		if err := checkVersions(ctx, st, id); err != nil {
			t.Errorf("invariant broken in chat %s: %v", id, err)
		}
	}
}

// checkVersions checks what a chat keeps of its versions: every
// superseded message names the message it followed (an earlier message of
// the chat, not a compaction, or 0), and no message of the history does.
func checkVersions(ctx context.Context, st Store, id string) error {
	seen := map[int64]chat.Message{}
	for after := int64(0); ; {
		page, err := st.ListEveryMessage(ctx, id, after, store.MaxPageSize)
		if err != nil {
			return err
		}
		for _, m := range page {
			switch {
			case !m.Superseded && m.ParentID != nil:
				return fmt.Errorf("message %d of the history names a parent (%d)", m.ID, *m.ParentID)
			case m.Superseded && m.ParentID == nil:
				return fmt.Errorf("superseded message %d names no parent", m.ID)
			case m.Superseded && *m.ParentID != 0:
				p, ok := seen[*m.ParentID]
				if !ok || chat.IsCompaction(p) {
					return fmt.Errorf("superseded message %d follows %d, not an earlier message of the chat", m.ID, *m.ParentID)
				}
			}
			seen[m.ID] = m
		}
		if len(page) < store.MaxPageSize {
			return nil
		}
		after = page[len(page)-1].ID
	}
}

// MayWait reports whether a call of c, with history msgs, may stay open:
// in requires_action, a call that waits for the client (a dynamic tool) or
// for a person's decision; a call a person approved, which runs when the
// chat does, while it is pending or still waits for another call.
func MayWait(c chat.Chat, msgs []chat.Message) func(chat.ToolCall) bool {
	pending := chat.PendingActions(msgs, c.DynamicTools)
	notStarted, started := chat.ApprovedCalls(msgs)
	approved := append(notStarted, started...)
	has := func(calls []chat.ToolCall, call chat.ToolCall) bool {
		return slices.ContainsFunc(calls, func(p chat.ToolCall) bool { return p.ToolCallID == call.ToolCallID })
	}
	return func(call chat.ToolCall) bool {
		switch c.Status {
		case chat.RequiresAction:
			return has(pending, call) || (len(pending) > 0 && has(approved, call))
		case chat.Pending:
			return has(approved, call)
		}
		return false
	}
}
