package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// useFiles records that the chat uses the uploaded files parts name
// (file_refs), so their bytes stay while the chat exists. An id that
// names no file is left out. The statement travels with the
// transaction's next round trip, which reports its failure.
func (t *tx) useFiles(chatID string, parts []chat.Part) {
	ids := dbutil.FileIDs(parts)
	if len(ids) == 0 {
		return
	}
	t.lazy.deferExec(func(_ pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("record the use of files %v by chat %s: %w", ids, chatID, classify(err))
		}
		return nil
	}, `INSERT INTO file_refs (file_id, chat_id) SELECT id, $1 FROM files WHERE id = ANY($2::text[])
		ON CONFLICT DO NOTHING`, chatID, ids)
}

// purgeFiles deletes the owner's deleted files that no chat uses, then the
// blobs (and their chunks) that no file of the owner names any more: what
// DeleteFile and DeleteChat leave unused. The caller holds the owner's
// lock, so no upload is adding a file to a blob it deletes.
func purgeFiles(ctx context.Context, q querier, owner string) error {
	_, err := q.Exec(ctx, `WITH gone_files AS (
			DELETE FROM files WHERE owner = $1 AND deleted_at IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM file_refs r WHERE r.file_id = files.id)
			RETURNING id
		), unused AS (
			SELECT b.sha256 FROM file_blobs b WHERE b.owner = $1
			AND NOT EXISTS (SELECT 1 FROM files f WHERE f.owner = b.owner AND f.sha256 = b.sha256
				AND f.id NOT IN (SELECT id FROM gone_files))
		), gone_chunks AS (
			DELETE FROM file_chunks WHERE owner = $1 AND sha256 IN (SELECT sha256 FROM unused)
		)
		DELETE FROM file_blobs WHERE owner = $1 AND sha256 IN (SELECT sha256 FROM unused)`, owner)
	if err != nil {
		return fmt.Errorf("purge the unused files of %s: %w", owner, classify(err))
	}
	return nil
}
