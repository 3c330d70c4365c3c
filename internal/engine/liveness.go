package engine

import (
	"context"
	"fmt"
	"time"
)

// liveness is what a store offers when a worker's liveness is its database
// session (PostgreSQL: *postgres.Store): other replicas then recover a dead
// worker's chats within about a second instead of at their leases' expiry.
type liveness interface {
	// HoldLiveness holds workerID's liveness, calling held once it does,
	// until the session is lost (an error) or ctx ends (nil).
	HoldLiveness(ctx context.Context, workerID string, held func()) error
	// DeadWorkers returns the workers of running chats that hold no
	// liveness.
	DeadWorkers(ctx context.Context) ([]string, error)
	// RecoverWorkers makes the running chats of workers that still hold no
	// liveness pending again, counting the recovery if count.
	RecoverWorkers(ctx context.Context, workers []string, count bool) ([]string, error)
}

// errLivenessLost stops the runs of a worker whose database session was
// lost: another replica may be recovering its chats, so, as for a lost
// lease, the runs write nothing more.
var errLivenessLost = fmt.Errorf("the worker's database session was lost: %w", errLeaseLost)

// setAlive starts a session for runs (under runs) as worker when worker is
// not "", and ends the current one, stopping its runs, when it is.
func (e *Engine) setAlive(runs context.Context, worker string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case worker != "" && e.session == nil:
		e.session, e.endSess = context.WithCancelCause(runs)
		e.worker = worker
		e.kickAcquirer()
	case worker == "" && e.session != nil:
		e.endSess(errLivenessLost)
		e.session, e.endSess, e.worker = nil, nil, ""
		if runs.Err() == nil {
			e.log.Warn("the worker's database session was lost: its chats are stopped, and another replica recovers them")
		}
	}
}

// current returns the context of the running session and the worker id
// its leases carry; a nil context when there is none.
func (e *Engine) current() (context.Context, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.session, e.worker
}

// holdLiveness keeps this worker's liveness until ctx ends, each session
// under a worker id of its own: the base id (Config.WorkerID) first, then
// the base id with the session's number. A session that was lost took its
// id with it, so the chats its worker held look dead to every replica, and
// are recovered, even once this process holds a new session.
func (e *Engine) holdLiveness(ctx, runs context.Context, lv liveness) {
	pause := 100 * time.Millisecond
	for n := 1; ctx.Err() == nil; n++ {
		id := e.cfg.WorkerID
		if n > 1 {
			id = fmt.Sprintf("%s~%d", e.cfg.WorkerID, n)
		}
		held := false
		err := lv.HoldLiveness(ctx, id, func() { held = true; e.setAlive(runs, id) })
		if held {
			e.setAlive(runs, "")
			pause = 100 * time.Millisecond
		}
		if ctx.Err() != nil {
			return
		}
		// The database may be what was lost, for every worker: recoveries
		// now are not counted against the chats (outage).
		e.lastOutage.Store(time.Now().UnixNano())
		e.log.Warn("hold the worker's liveness; trying again", "worker", id, "err", err, "pause", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// livenessCheck is how often the engine looks for workers that died; a
// worker is recovered when two checks in a row found it without liveness.
// A worker whose session PostgreSQL ended has usually stopped its runs by
// then (it checks its session more often), but not always (a session that
// stops answering takes it longer to notice): then its writes are refused
// by their fence, as for any lost lease.
const livenessCheck = 500 * time.Millisecond

// recoverDeadWorkers recovers, until ctx ends, the chats of workers whose
// liveness is gone: found dead by two checks in a row, they are made
// pending again at once, without waiting for their leases to expire.
func (e *Engine) recoverDeadWorkers(ctx context.Context, lv liveness) {
	tick := time.NewTicker(livenessCheck)
	defer tick.Stop()
	var before map[string]bool // the workers the last check found dead
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		dead, err := lv.DeadWorkers(ctx)
		if err != nil {
			if ctx.Err() == nil {
				e.unavailable(err)
				e.log.Warn("look for dead workers", "err", err)
			}
			before = nil
			continue
		}
		var gone []string
		now := make(map[string]bool, len(dead))
		for _, w := range dead {
			now[w] = true
			if before[w] {
				gone = append(gone, w)
			}
		}
		before = now
		if len(gone) == 0 {
			continue
		}
		ids, err := lv.RecoverWorkers(ctx, gone, !e.outage())
		if err != nil {
			if ctx.Err() == nil {
				e.unavailable(err)
				e.log.Warn("recover the chats of dead workers", "workers", gone, "err", err)
			}
			continue
		}
		e.announceRecovered(ctx, ids, "recovered a chat whose worker's database session ended")
	}
}
