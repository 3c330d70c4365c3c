package api

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
)

// ownerStatsTimeout bounds the database read of one scrape.
const ownerStatsTimeout = 2 * time.Second

// ownerStatsReader is what the per-owner gauges read; the store implements it.
type ownerStatsReader interface {
	OwnerStats(ctx context.Context, since time.Time) ([]store.OwnerStat, error)
}

// ownerStats collects, at each scrape, every owner's pending and running
// chats and its spend and tokens of the current UTC day, from the database
// (so they are the same on every replica). When the database cannot answer,
// the scrape goes on without them; the failure is logged once until a read
// succeeds again.
type ownerStats struct {
	st      ownerStatsReader
	now     func() time.Time
	log     *slog.Logger
	failing atomic.Bool

	queue, running, spend, tokens *prometheus.Desc
}

func newOwnerStats(st ownerStatsReader, now func() time.Time, log *slog.Logger) *ownerStats {
	owner := []string{"owner"}
	day := prometheus.Labels{"period": string(quota.Day)}
	return &ownerStats{st: st, now: now, log: log,
		queue:   prometheus.NewDesc("parley_owner_queue_depth", "The owner's pending chats.", owner, nil),
		running: prometheus.NewDesc("parley_owner_running", "The owner's running chats.", owner, nil),
		spend:   prometheus.NewDesc("parley_owner_spend_micros", "The owner's recorded cost in micro-dollars in the current UTC period.", owner, day),
		tokens:  prometheus.NewDesc("parley_owner_tokens", "The owner's recorded input and output tokens in the current UTC period.", owner, day),
	}
}

func (c *ownerStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queue
	ch <- c.running
	ch <- c.spend
	ch <- c.tokens
}

func (c *ownerStats) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), ownerStatsTimeout)
	defer cancel()
	stats, err := c.st.OwnerStats(ctx, quota.Day.Start(c.now()))
	if err != nil {
		if !c.failing.Swap(true) {
			c.log.Warn("metrics: the per-owner gauges are left out until the database answers", "err", err)
		}
		return
	}
	if c.failing.Swap(false) {
		c.log.Info("metrics: the per-owner gauges are back")
	}
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(s.Pending), s.Owner)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(s.Running), s.Owner)
		ch <- prometheus.MustNewConstMetric(c.spend, prometheus.GaugeValue, float64(s.Usage.CostMicros), s.Owner)
		ch <- prometheus.MustNewConstMetric(c.tokens, prometheus.GaugeValue, float64(s.Usage.InputTokens+s.Usage.OutputTokens), s.Owner)
	}
}
