package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// The fair-acquisition rows' queue: -fair-chats pending chats of fairOwners
// owners, one heavy owner holding all but fairLight of each other owner's,
// all of the heavy owner's older than the rest. Acquisitions take fairMax.
const (
	fairOwners = 100
	fairLight  = 10 // pending chats of each light owner
	fairMax    = 8
)

// oldestFirstSQL is how AcquireChats chose its chats before acquisition
// was fair: the oldest pending chats, whatever their owner. It is the
// floor the fair statement is timed against.
const oldestFirstSQL = `UPDATE chats
	SET status = 'running', worker_id = $1, lease_generation = lease_generation + 1,
		lease_expires_at = now() + $2::bigint * interval '1 microsecond', version = version + 1, updated_at = now()
	WHERE id IN (SELECT id FROM chats WHERE status = 'pending'
		ORDER BY updated_at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
	RETURNING owner`

// fairResult is what the fair-acquisition measurement found.
type fairResult struct {
	fair, oldest         latencies // one acquisition of fairMax
	fairWait, oldestWait int       // rounds until every owner's first chat ran
}

// fairBench acquires from the queue both ways: the store's AcquireChats,
// and oldestFirstSQL on the store's pool.
type fairBench struct {
	st   store.Store
	pool *pgxpool.Pool
}

// acquire takes up to fairMax chats one way and returns their owners.
func (f fairBench) acquire(ctx context.Context, fair bool) ([]string, error) {
	if fair {
		cs, _, err := f.st.AcquireChats(ctx, store.Acquire{WorkerID: "bench", TTL: time.Hour, Max: fairMax})
		owners := make([]string, len(cs))
		for i, c := range cs {
			owners[i] = c.Owner
		}
		return owners, err
	}
	rows, err := f.pool.Query(ctx, oldestFirstSQL, "bench", time.Hour.Microseconds(), fairMax)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var owners []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, err
		}
		owners = append(owners, o)
	}
	return owners, rows.Err()
}

// reset puts every chat back in the queue as it was built: pending, each
// waiting since its creation.
func (f fairBench) reset(ctx context.Context) error {
	_, err := f.pool.Exec(ctx, `UPDATE chats SET status = 'pending', worker_id = '', lease_expires_at = NULL,
		updated_at = created_at WHERE status = 'running'`)
	return err
}

// measureFair builds the queue on a fresh PostgreSQL schema, then times
// rounds acquisitions each way, interleaved, putting the chats back after
// each; then it drains the queue each way, fairMax chats a round, the
// chats staying running, and counts the rounds until every owner had its
// first chat taken.
func measureFair(ctx context.Context, r *replica, fairChats, rounds int) (fairResult, error) {
	var res fairResult
	f := fairBench{st: r.st, pool: r.pg.Pool()}
	if err := insertFairQueue(ctx, r.st, fairChats); err != nil {
		return res, err
	}
	if _, err := f.pool.Exec(ctx, "ANALYZE chats, owners"); err != nil {
		return res, fmt.Errorf("fair: analyze: %w", err)
	}
	for i := range rounds + fairWarmup {
		for _, fair := range []bool{i%2 == 0, i%2 != 0} {
			start := time.Now()
			owners, err := f.acquire(ctx, fair)
			d := time.Since(start)
			if err != nil {
				return res, fmt.Errorf("fair: acquire: %w", err)
			}
			if len(owners) != fairMax {
				return res, fmt.Errorf("fair: an acquisition took %d chats, want %d", len(owners), fairMax)
			}
			if err := f.reset(ctx); err != nil {
				return res, fmt.Errorf("fair: reset: %w", err)
			}
			if i < fairWarmup {
				continue
			}
			if fair {
				res.fair = append(res.fair, d)
			} else {
				res.oldest = append(res.oldest, d)
			}
		}
	}
	slices.Sort(res.fair)
	slices.Sort(res.oldest)
	var err error
	if res.fairWait, err = drainRounds(ctx, f, true); err != nil {
		return res, err
	}
	if res.oldestWait, err = drainRounds(ctx, f, false); err != nil {
		return res, err
	}
	return res, nil
}

// fairWarmup is how many acquisitions each way run before the timed ones.
const fairWarmup = 10

// drainRounds acquires one way until every owner had a chat taken and
// returns the rounds that took; the queue is put back after.
func drainRounds(ctx context.Context, f fairBench, fair bool) (int, error) {
	seen := map[string]bool{}
	round := 0
	for len(seen) < fairOwners {
		round++
		owners, err := f.acquire(ctx, fair)
		if err != nil {
			return 0, fmt.Errorf("fair: drain: %w", err)
		}
		if len(owners) == 0 {
			return 0, fmt.Errorf("fair: the queue ran dry with %d of %d owners served", len(seen), fairOwners)
		}
		for _, o := range owners {
			seen[o] = true
		}
	}
	if err := f.reset(ctx); err != nil {
		return 0, fmt.Errorf("fair: reset: %w", err)
	}
	return round, nil
}

// insertFairQueue creates the owners and their pending chats through the
// store, the heavy owner's first, in transactions of 1,000.
func insertFairQueue(ctx context.Context, st store.Store, fairChats int) error {
	var queue []string
	owners := []string{"heavy"}
	for range fairChats - (fairOwners-1)*fairLight {
		queue = append(queue, "heavy")
	}
	for i := 1; i < fairOwners; i++ {
		o := fmt.Sprintf("light-%02d", i)
		owners = append(owners, o)
		for range fairLight {
			queue = append(queue, o)
		}
	}
	err := st.InTx(ctx, func(tx store.Tx) error {
		for _, o := range owners {
			if _, err := tx.CreateOwner(ctx, o); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fair: create owners: %w", err)
	}
	for batch := range slices.Chunk(queue, 1000) {
		err := st.InTx(ctx, func(tx store.Tx) error {
			for _, o := range batch {
				id, err := uuid.NewV7()
				if err != nil {
					return err
				}
				c := chat.Chat{ID: id.String(), Owner: o, Title: "bench", Model: modelName, Status: chat.Pending, Labels: map[string]string{}}
				if err := tx.InsertChat(ctx, &c); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("fair: insert chats: %w", err)
		}
	}
	return nil
}

// fairRows measures fair acquisition on PostgreSQL against the
// oldest-first statement it replaced.
func (b *bench) fairRows(ctx context.Context, r *replica) {
	fairChats := b.o.fairChats
	b.step("fair acquisition: %d pending chats of %d owners, %d acquisitions of %d each way", fairChats, fairOwners, b.o.fairRounds, fairMax)
	res, err := measureFair(ctx, r, fairChats, b.o.fairRounds)
	what := fmt.Sprintf("PostgreSQL, %s pending chats of %d owners (one with %s older ones), Max %d",
		thousands(int64(fairChats)), fairOwners, thousands(int64(fairChats-(fairOwners-1)*fairLight)), fairMax)
	if err != nil {
		b.t.failed("fair acquisition, "+what, err)
		return
	}
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		got, floor := res.fair.percentile(p.q), res.oldest.percentile(p.q)
		b.t.add(row{metric: fmt.Sprintf("fair AcquireChats, %s (%d acquisitions): %s", what, len(res.fair), p.name),
			value: ms(got), target: "oldest-first: " + ms(floor),
			ratio: fmt.Sprintf("%.1f×", float64(got)/float64(floor))})
	}
	best := (fairOwners + fairMax - 1) / fairMax
	b.t.add(row{metric: fmt.Sprintf("rounds until every owner's first chat is taken, draining by %d, fair, %s", fairMax, what),
		value: fmt.Sprint(res.fairWait), target: fmt.Sprintf("%d (⌈%d owners / %d⌉)", best, fairOwners, fairMax),
		pass: verdict(res.fairWait == best)})
	b.t.add(row{metric: fmt.Sprintf("the same, oldest-first, %s", what),
		value: thousands(int64(res.oldestWait)), target: "", ratio: fmt.Sprintf("%.0f× fair", float64(res.oldestWait)/float64(res.fairWait))})
}
