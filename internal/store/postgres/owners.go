package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

func (r reader) CountOwners(ctx context.Context) (int, error) {
	var n int
	if err := r.q.QueryRow(ctx, `SELECT count(*) FROM owners`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count owners: %w", err)
	}
	return n, nil
}

func (r reader) GetToken(ctx context.Context, id string) (store.Token, error) {
	t, err := dbutil.ScanToken(r.q.QueryRow(ctx, `SELECT `+dbutil.TokenColumns+` FROM api_tokens WHERE id = $1`, id))
	if err != nil {
		return store.Token{}, fmt.Errorf("get token %s: %w", id, notFound(err))
	}
	return t, nil
}

func (r reader) ListTokens(ctx context.Context, owner string) ([]store.Token, error) {
	toks, err := queryAll(ctx, r.q, dbutil.ScanToken, `SELECT `+dbutil.TokenColumns+` FROM api_tokens
		WHERE $1 = '' OR owner = $1 ORDER BY created_at, id`, owner)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return toks, nil
}

func (t *tx) CreateOwner(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, errors.New("create owner: empty name")
	}
	// ON CONFLICT waits for a concurrent insert of the same name to commit,
	// so of two transactions creating one owner, exactly one reports created.
	tag, err := t.q.Exec(ctx, `INSERT INTO owners (name, created_at) VALUES ($1, $2)
		ON CONFLICT (name) DO NOTHING`, name, dbutil.Now())
	if err != nil {
		return false, fmt.Errorf("create owner %s: %w", name, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (t *tx) InsertToken(ctx context.Context, tok *store.Token) error {
	if tok.ID == "" || len(tok.Hash) == 0 {
		return errors.New("insert token: id and hash are required")
	}
	now := dbutil.Now()
	tag, err := t.q.Exec(ctx, `INSERT INTO api_tokens (`+dbutil.TokenColumns+`)
		SELECT $1::text, $2::text, $3::text, $4::bytea, $5::timestamptz, $6::timestamptz
		WHERE EXISTS (SELECT 1 FROM owners WHERE name = $2)
		ON CONFLICT (id) DO NOTHING`,
		tok.ID, tok.Owner, tok.Name, tok.Hash, now, dbutil.UTCPtr(tok.RevokedAt))
	if err != nil {
		return fmt.Errorf("insert token %s: %w", tok.ID, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return t.insertRefused(ctx, "token", tok.ID, "api_tokens", tok.Owner)
	}
	tok.CreatedAt = now
	tok.RevokedAt = dbutil.UTCPtr(tok.RevokedAt)
	return nil
}

func (t *tx) RevokeToken(ctx context.Context, id string) error {
	tag, err := t.q.Exec(ctx, `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1`,
		id, dbutil.Now())
	if err := oneRow(tag, err); err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	return nil
}

// oneRow checks that a statement changed a row: store.ErrNotFound if none.
func oneRow(tag pgconn.CommandTag, err error) error {
	if err != nil {
		return classify(err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// LockOwner takes the owner's row FOR NO KEY UPDATE: it waits for another
// transaction holding it, but not for those that insert rows referring to
// the owner (their foreign key check takes FOR KEY SHARE).
func (t *tx) LockOwner(ctx context.Context, owner string) error {
	var one int
	err := t.q.QueryRow(ctx, `SELECT 1 FROM owners WHERE name = $1 FOR NO KEY UPDATE`, owner).Scan(&one)
	if err = notFound(err); err != nil {
		return fmt.Errorf("lock owner %s: %w", owner, err)
	}
	return nil
}
