package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// PutFile writes the file's row, and its blob a chunk at a time when the
// owner does not have it yet, in one transaction of the writer: uploads
// pass one at a time, each counting the bytes the ones before it stored.
func (s *Store) PutFile(ctx context.Context, f *store.File, content io.Reader, maxBytes int64) error {
	if err := dbutil.CheckNewFile(f); err != nil {
		return err
	}
	now := dbutil.Now()
	err := s.InTx(ctx, func(stx store.Tx) error {
		q := stx.(*tx).q
		if maxBytes > 0 {
			var stored, have int64
			err := q.QueryRowContext(ctx, `SELECT coalesce(sum(size), 0), coalesce(sum(sha256 = ?), 0)
				FROM file_blobs WHERE owner = ?`, f.SHA256, f.Owner).Scan(&stored, &have)
			if err != nil {
				return err
			}
			if have == 0 && stored+f.Size > maxBytes {
				return store.ErrCapReached
			}
		}
		res, err := q.ExecContext(ctx, `INSERT INTO file_blobs (owner, sha256, size, created_at)
			SELECT name, ?, ?, ? FROM owners WHERE name = ?
			ON CONFLICT (owner, sha256) DO NOTHING`, f.SHA256, f.Size, dbutil.Micros(now), f.Owner)
		if err != nil {
			return classify(err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 1 {
			err := dbutil.WriteChunks(content, f.Size, f.SHA256, func(seq int, data []byte) error {
				_, err := q.ExecContext(ctx, `INSERT INTO file_chunks (owner, sha256, seq, data) VALUES (?, ?, ?, ?)`,
					f.Owner, f.SHA256, seq, data)
				return err
			})
			if err != nil {
				return err
			}
		}
		// No blob row now means no owner.
		res, err = q.ExecContext(ctx, `INSERT INTO files (`+dbutil.FileColumns+`)
			SELECT ?, owner, ?, ?, ?, sha256, ?, NULL FROM file_blobs WHERE owner = ? AND sha256 = ?`,
			f.ID, f.Name, f.MediaType, f.Size, dbutil.Micros(now), f.Owner, f.SHA256)
		if err := oneRow(res, err); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("owner %s: %w", f.Owner, err)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put file %s: %w", f.ID, err)
	}
	f.CreatedAt = now
	f.Deleted = false
	return nil
}

func (r reader) GetFile(ctx context.Context, owner, id string) (store.File, error) {
	f, err := dbutil.ScanFile(r.q.QueryRowContext(ctx, `SELECT `+dbutil.FileColumns+` FROM files WHERE id = ? AND owner = ?`, id, owner))
	if err = notFound(err); err != nil {
		return store.File{}, fmt.Errorf("get file %s: %w", id, err)
	}
	return f, nil
}

func (r reader) ListFiles(ctx context.Context, q store.FileQuery) (store.FilePage, error) {
	limit := dbutil.PageLimit(q.Limit)
	where := []string{"owner = ?", "deleted_at IS NULL"}
	args := []any{q.Owner}
	if q.Cursor != "" {
		at, id, err := dbutil.DecodeCursor(q.Cursor)
		if err != nil {
			return store.FilePage{}, fmt.Errorf("list files: %w", err)
		}
		where = append(where, "(created_at, id) < (?, ?)")
		args = append(args, dbutil.Micros(at), id)
	}
	args = append(args, limit+1)
	files, err := queryAll(ctx, r.q, dbutil.ScanFile, `SELECT `+dbutil.FileColumns+` FROM files WHERE `+strings.Join(where, " AND ")+
		` ORDER BY created_at DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return store.FilePage{}, fmt.Errorf("list files of %s: %w", q.Owner, err)
	}
	return dbutil.FilePage(files, limit), nil
}

func (s *Store) DeleteFile(ctx context.Context, owner, id string) error {
	err := s.InTx(ctx, func(stx store.Tx) error {
		q := stx.(*tx).q
		res, err := q.ExecContext(ctx, `UPDATE files SET deleted_at = ?
			WHERE id = ? AND owner = ? AND deleted_at IS NULL`, dbutil.Micros(dbutil.Now()), id, owner)
		if err := oneRow(res, err); err != nil {
			return err
		}
		return purgeFiles(ctx, q, owner)
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
		err := r.q.QueryRowContext(ctx, `SELECT data FROM file_chunks WHERE owner = ? AND sha256 = ? AND seq = ?`,
			f.Owner, f.SHA256, seq).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			err = fmt.Errorf("chunk %d of %s is missing", seq, f.SHA256)
		}
		return data, err
	}), nil
}

func (r reader) OwnerFileBytes(ctx context.Context, owner string) (int64, error) {
	var n int64
	err := r.q.QueryRowContext(ctx, `SELECT coalesce(sum(size), 0) FROM file_blobs WHERE owner = ?`, owner).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("file bytes of owner %s: %w", owner, err)
	}
	return n, nil
}

func (r reader) ChatUsesFile(ctx context.Context, chatID, fileID string) (bool, error) {
	var used bool
	err := r.q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM file_refs WHERE file_id = ? AND chat_id = ?)`,
		fileID, chatID).Scan(&used)
	if err != nil {
		return false, fmt.Errorf("does chat %s use file %s: %w", chatID, fileID, err)
	}
	return used, nil
}
