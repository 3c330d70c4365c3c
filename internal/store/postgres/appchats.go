package postgres

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/internal/store"
)

func (r reader) AppChat(ctx context.Context, owner, appID string) (string, error) {
	var id string
	err := r.q.QueryRow(ctx, `SELECT chat_id FROM app_chats WHERE owner = $1 AND app_id = $2`, owner, appID).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("app chat %q: %w", appID, notFound(err))
	}
	return id, nil
}

// BindAppChat inserts the binding unless the app id has one. ON CONFLICT
// DO NOTHING waits for a concurrent binding of the same id to commit or
// roll back and raises no error, so the transaction can go on: a binding
// that lost the race reads the winner's with AppChat. The insert checks
// the chat exists, so an unknown one does not fail the foreign key (which
// would abort the transaction).
func (t *tx) BindAppChat(ctx context.Context, owner, appID, chatID string) error {
	tag, err := t.q.Exec(ctx, `INSERT INTO app_chats (owner, app_id, chat_id)
		SELECT $1::text, $2::text, $3::text WHERE EXISTS (SELECT 1 FROM chats WHERE id = $3)
		ON CONFLICT (owner, app_id) DO NOTHING`, owner, appID, chatID)
	if err != nil {
		return fmt.Errorf("bind app chat %q to %s: %w", appID, chatID, classify(err))
	}
	if tag.RowsAffected() == 0 {
		var exists bool
		if err := t.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM chats WHERE id = $1)`, chatID).Scan(&exists); err != nil {
			return fmt.Errorf("bind app chat %q to %s: %w", appID, chatID, err)
		}
		if !exists {
			return fmt.Errorf("bind app chat %q to %s: chat %w", appID, chatID, store.ErrNotFound)
		}
		return fmt.Errorf("bind app chat %q to %s: %w", appID, chatID, store.ErrExists)
	}
	return nil
}
