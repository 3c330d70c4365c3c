package sqlite

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/internal/store"
)

func (r reader) AppChat(ctx context.Context, owner, appID string) (string, error) {
	var id string
	err := r.q.QueryRowContext(ctx, `SELECT chat_id FROM app_chats WHERE owner = ? AND app_id = ?`, owner, appID).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("app chat %q: %w", appID, notFound(err))
	}
	return id, nil
}

// BindAppChat inserts the binding unless the app id has one; the chat's
// foreign key refuses an unknown chat.
func (t *tx) BindAppChat(ctx context.Context, owner, appID, chatID string) error {
	res, err := t.q.ExecContext(ctx, `INSERT INTO app_chats (owner, app_id, chat_id) VALUES (?, ?, ?)
		ON CONFLICT (owner, app_id) DO NOTHING`, owner, appID, chatID)
	if err != nil {
		return fmt.Errorf("bind app chat %q to %s: %w", appID, chatID, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("bind app chat %q to %s: %w", appID, chatID, err)
	} else if n == 0 {
		return fmt.Errorf("bind app chat %q to %s: %w", appID, chatID, store.ErrExists)
	}
	return nil
}
