package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// PutFile writes the file's row, and its blob a chunk at a time when the
// owner does not have it yet, in one transaction. It is not tried again on
// failure (content cannot be read twice). It first takes the owner's lock
// (as Tx.LockOwner), so one owner's uploads, and the purges of DeleteFile
// and DeleteChat, pass one at a time: each counts the bytes the ones
// before it stored, and none purges a blob another is adding a file to.
func (s *Store) PutFile(ctx context.Context, f *store.File, content io.Reader, maxBytes int64) error {
	if err := dbutil.CheckNewFile(f); err != nil {
		return err
	}
	now := dbutil.Now()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The lock first, the count in a statement of its own: a statement
		// that waited for the lock still reads as of its start.
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM owners WHERE name = $1 FOR NO KEY UPDATE`, f.Owner).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("owner %s: %w", f.Owner, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		var stored, have int64
		err = tx.QueryRow(ctx, `SELECT coalesce(sum(size), 0)::bigint, count(*) FILTER (WHERE sha256 = $2)
			FROM file_blobs WHERE owner = $1`, f.Owner, f.SHA256).Scan(&stored, &have)
		if err != nil {
			return err
		}
		if maxBytes > 0 && have == 0 && stored+f.Size > maxBytes {
			return store.ErrCapReached
		}
		tag, err := tx.Exec(ctx, `INSERT INTO file_blobs (owner, sha256, size, created_at)
			SELECT name, $2, $3, $4 FROM owners WHERE name = $1
			ON CONFLICT (owner, sha256) DO NOTHING`, f.Owner, f.SHA256, f.Size, now)
		if err != nil {
			return classify(err)
		}
		if tag.RowsAffected() == 1 {
			err := dbutil.WriteChunks(content, f.Size, f.SHA256, func(seq int, data []byte) error {
				_, err := tx.Exec(ctx, `INSERT INTO file_chunks (owner, sha256, seq, data) VALUES ($1, $2, $3, $4)`,
					f.Owner, f.SHA256, seq, data)
				return err
			})
			if err != nil {
				return err
			}
		}
		// No blob row now means no owner.
		tag, err = tx.Exec(ctx, `INSERT INTO files (`+dbutil.FileColumns+`)
			SELECT $1, owner, $2, $3, $4, sha256, $5, NULL FROM file_blobs WHERE owner = $6 AND sha256 = $7`,
			f.ID, f.Name, f.MediaType, f.Size, now, f.Owner, f.SHA256)
		if err := oneRow(tag, err); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("owner %s: %w", f.Owner, err)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put file %s: %w", f.ID, markUnavailable(err))
	}
	f.CreatedAt = now
	f.Deleted = false
	return nil
}

func (r reader) GetFile(ctx context.Context, owner, id string) (store.File, error) {
	f, err := dbutil.ScanFile(r.q.QueryRow(ctx, `SELECT `+dbutil.FileColumns+` FROM files WHERE id = $1 AND owner = $2`, id, owner))
	if err = notFound(err); err != nil {
		return store.File{}, fmt.Errorf("get file %s: %w", id, err)
	}
	return f, nil
}

func (r reader) ListFiles(ctx context.Context, q store.FileQuery) (store.FilePage, error) {
	limit := dbutil.PageLimit(q.Limit)
	where := []string{"owner = $1", "deleted_at IS NULL"}
	args := []any{q.Owner}
	if q.Cursor != "" {
		at, id, err := dbutil.DecodeCursor(q.Cursor)
		if err != nil {
			return store.FilePage{}, fmt.Errorf("list files: %w", err)
		}
		where = append(where, "(created_at, id) < ($2, $3)")
		args = append(args, at, id)
	}
	args = append(args, limit+1)
	files, err := queryAll(ctx, r.q, dbutil.ScanFile, `SELECT `+dbutil.FileColumns+` FROM files WHERE `+strings.Join(where, " AND ")+
		fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT $%d`, len(args)), args...)
	if err != nil {
		return store.FilePage{}, fmt.Errorf("list files of %s: %w", q.Owner, err)
	}
	return dbutil.FilePage(files, limit), nil
}

func (s *Store) DeleteFile(ctx context.Context, owner, id string) error {
	err := s.InTx(ctx, func(stx store.Tx) error {
		t := stx.(*tx)
		if err := t.LockOwner(ctx, owner); err != nil {
			return err
		}
		tag, err := t.q.Exec(ctx, `UPDATE files SET deleted_at = $3 WHERE id = $1 AND owner = $2 AND deleted_at IS NULL`,
			id, owner, dbutil.Now())
		if err := oneRow(tag, err); err != nil {
			return err
		}
		return purgeFiles(ctx, t.q, owner)
	})
	if err != nil {
		return fmt.Errorf("delete file %s: %w", id, err)
	}
	return nil
}

func (r reader) FileData(ctx context.Context, owner, id string) (store.File, []byte, error) {
	f, rc, err := r.OpenFile(ctx, owner, id)
	return dbutil.ReadFile(f, rc, err)
}

func (r reader) OpenFile(ctx context.Context, owner, id string) (store.File, io.ReadCloser, error) {
	f, err := r.GetFile(ctx, owner, id)
	if err != nil {
		return store.File{}, nil, err
	}
	return f, dbutil.NewChunkReader(f.Size, func(seq int) ([]byte, error) {
		var data []byte
		err := r.q.QueryRow(ctx, `SELECT data FROM file_chunks WHERE owner = $1 AND sha256 = $2 AND seq = $3`,
			f.Owner, f.SHA256, seq).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("chunk %d of %s is missing", seq, f.SHA256)
		}
		return data, err
	}), nil
}

func (r reader) OwnerFileBytes(ctx context.Context, owner string) (int64, error) {
	var n int64
	err := r.q.QueryRow(ctx, `SELECT coalesce(sum(size), 0)::bigint FROM file_blobs WHERE owner = $1`, owner).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("file bytes of owner %s: %w", owner, err)
	}
	return n, nil
}

func (r reader) ChatUsesFile(ctx context.Context, chatID, fileID string) (bool, error) {
	var used bool
	err := r.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM file_refs WHERE file_id = $1 AND chat_id = $2)`,
		fileID, chatID).Scan(&used)
	if err != nil {
		return false, fmt.Errorf("does chat %s use file %s: %w", chatID, fileID, err)
	}
	return used, nil
}
