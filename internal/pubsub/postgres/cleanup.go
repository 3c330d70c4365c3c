package postgres

import (
	"context"
	"fmt"
	"time"
)

// cleanupLoop deletes expired large payloads every cleanup interval until
// ctx is done. Every replica runs it; deleting twice is harmless.
func (p *PubSub) cleanupLoop(ctx context.Context) {
	defer p.wg.Done()
	t := time.NewTicker(p.opts.cleanupInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := p.deleteExpired(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.Warn("pubsub: delete expired payloads", "err", err)
		case n > 0:
			p.log.Debug("pubsub: deleted expired payloads", "rows", n)
		}
	}
}

// deleteExpired deletes the large payloads older than the payload TTL, by
// the database's clock so that replicas' clocks do not matter.
func (p *PubSub) deleteExpired(ctx context.Context) (int64, error) {
	tag, err := p.pool.Exec(ctx,
		"DELETE FROM pubsub_payloads WHERE created_at < now() - make_interval(secs => $1)",
		p.opts.payloadTTL.Seconds())
	if err != nil {
		return 0, fmt.Errorf("delete expired payloads: %w", err)
	}
	return tag.RowsAffected(), nil
}
