package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

func (r reader) CountOwners(ctx context.Context) (int, error) {
	var n int
	if err := r.q.QueryRowContext(ctx, `SELECT count(*) FROM owners`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count owners: %w", err)
	}
	return n, nil
}

func (r reader) GetToken(ctx context.Context, id string) (store.Token, error) {
	t, err := dbutil.ScanToken(r.q.QueryRowContext(ctx, `SELECT `+dbutil.TokenColumns+` FROM api_tokens WHERE id = ?`, id))
	if err != nil {
		return store.Token{}, fmt.Errorf("get token %s: %w", id, notFound(err))
	}
	return t, nil
}

func (r reader) ListTokens(ctx context.Context, owner string) ([]store.Token, error) {
	toks, err := queryAll(ctx, r.q, dbutil.ScanToken, `SELECT `+dbutil.TokenColumns+` FROM api_tokens
		WHERE ? = '' OR owner = ? ORDER BY created_at, id`, owner, owner)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return toks, nil
}

func (t *tx) CreateOwner(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, errors.New("create owner: empty name")
	}
	res, err := t.q.ExecContext(ctx, `INSERT INTO owners (name, created_at) VALUES (?, ?)
		ON CONFLICT (name) DO NOTHING`, name, dbutil.Micros(dbutil.Now()))
	if err != nil {
		return false, fmt.Errorf("create owner %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("create owner %s: %w", name, err)
	}
	return n == 1, nil
}

func (t *tx) InsertToken(ctx context.Context, tok *store.Token) error {
	if tok.ID == "" || len(tok.Hash) == 0 {
		return errors.New("insert token: id and hash are required")
	}
	now := dbutil.Now()
	res, err := t.q.ExecContext(ctx, `INSERT INTO api_tokens (`+dbutil.TokenColumns+`)
		SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM owners WHERE name = ?)
		ON CONFLICT (id) DO NOTHING`,
		tok.ID, tok.Owner, tok.Name, tok.Hash, dbutil.Micros(now), nullMicros(tok.RevokedAt), tok.Owner)
	if err != nil {
		return fmt.Errorf("insert token %s: %w", tok.ID, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("insert token %s: %w", tok.ID, err)
	} else if n == 0 {
		return t.insertRefused(ctx, "token", tok.ID, "api_tokens", tok.Owner)
	}
	tok.CreatedAt = now
	tok.RevokedAt = dbutil.UTCPtr(tok.RevokedAt)
	return nil
}

func (t *tx) RevokeToken(ctx context.Context, id string) error {
	res, err := t.q.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`,
		dbutil.Micros(dbutil.Now()), id)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	return nil
}

// LockOwner only checks that the owner exists: a write transaction holds
// the whole database, so those that check a cap already pass one at a time.
func (t *tx) LockOwner(ctx context.Context, owner string) error {
	var one int
	err := t.q.QueryRowContext(ctx, `SELECT 1 FROM owners WHERE name = ?`, owner).Scan(&one)
	if err = notFound(err); err != nil {
		return fmt.Errorf("lock owner %s: %w", owner, err)
	}
	return nil
}
