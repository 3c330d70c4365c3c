package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStatements bounds the statement cache: queries built at run time
// (list filters) beyond it are prepared each time.
const maxCachedStatements = 256

// stmtCache prepares each query once per pool. SQLite spends more time
// parsing a statement than running a small one, and a chat's step runs the
// same dozen statements every time.
//
// A statement is prepared on the pool, which needs a free connection: inside
// a transaction on the one writer connection that would wait forever, so a
// query first met in a transaction runs unprepared and is prepared after the
// transaction ends (prepareWanted).
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	wanted map[string]bool // met inside a transaction, not prepared yet
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// get returns the prepared statement of query, or nil if there is none yet
// (the caller then runs the query unprepared, which reports any error). In a
// transaction (inTx) it only notes the query for prepareWanted.
func (c *stmtCache) get(ctx context.Context, query string, inTx bool) *sql.Stmt {
	c.mu.Lock()
	if st, ok := c.m[query]; ok {
		c.mu.Unlock()
		return st
	}
	full := len(c.m)+len(c.wanted) >= maxCachedStatements
	if inTx && !full {
		c.wanted[query] = true
	}
	c.mu.Unlock()
	if inTx || full {
		return nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, dup := c.m[query]; dup {
		st.Close()
		return prev
	}
	c.m[query] = st
	return st
}

// prepareWanted prepares the queries first met inside a transaction; call it
// when no transaction of the caller holds the pool's connection. The mutex
// is not held while preparing: that waits for the connection, which another
// transaction may hold while it looks up the cache.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	var queries []string
	for q := range c.wanted {
		queries = append(queries, q)
	}
	clear(c.wanted)
	c.mu.Unlock()
	for _, q := range queries {
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if _, dup := c.m[q]; dup {
			st.Close()
		} else {
			c.m[q] = st
		}
		c.mu.Unlock()
	}
}

// close closes every cached statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// cached is a querier that runs queries as cached prepared statements, on
// the pool or, when tx is set, inside that transaction.
type cached struct {
	c  *stmtCache
	tx *sql.Tx
}

// stmt returns the statement to run query with, or nil.
func (q cached) stmt(ctx context.Context, query string) *sql.Stmt {
	st := q.c.get(ctx, query, q.tx != nil)
	if st != nil && q.tx != nil {
		st = q.tx.StmtContext(ctx, st)
	}
	return st
}

// direct is the plain querier of the pool or transaction.
func (q cached) direct() querier {
	if q.tx != nil {
		return q.tx
	}
	return q.c.db
}

func (q cached) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = q.statementContext(ctx)
	if st := q.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.direct().ExecContext(ctx, query, args...)
}

func (q cached) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = q.statementContext(ctx)
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.direct().QueryContext(ctx, query, args...)
}

func (q cached) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = q.statementContext(ctx)
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.direct().QueryRowContext(ctx, query, args...)
}

// statementContext is the context a statement runs with. In a write
// transaction it cannot be cancelled: the driver watches a cancellable
// context with a goroutine per statement, a third of a small write's cost,
// and the group commit rolls back a caller whose context ended by the end
// of its function anyway (txCall.call).
// Reads keep theirs, so a long listing stops with its request.
func (q cached) statementContext(ctx context.Context) context.Context {
	if q.tx != nil {
		return context.WithoutCancel(ctx)
	}
	return ctx
}
