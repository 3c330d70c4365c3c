package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/internal/webhook"
)

// startWebhooks starts this process's webhook deliverer; the returned
// function stops it and waits for the attempts in flight.
func startWebhooks(ctx context.Context, cfg *config.Config, st store.Store, ps pubsub.PubSub, reg *tools.Registry,
	metrics prometheus.Registerer, log *slog.Logger) (stop func(), err error) {
	m, err := webhook.NewMetrics(metrics, st)
	if err != nil {
		return nil, err
	}
	d, err := webhook.New(webhook.Config{
		Store:  st,
		PubSub: ps,
		Log:    log,
		Policy: webhook.Policy{
			Schedule:     cfg.Webhooks.Schedule(),
			MaxFailures:  cfg.Webhooks.MaxConsecutiveFailures,
			AllowPrivate: cfg.Webhooks.AllowPrivate,
		},
		Timeout: time.Duration(cfg.Webhooks.Timeout),
		Tools:   reg,
		Metrics: m,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	log.Info("webhook deliverer started", "worker", d.WorkerID())
	return func() { cancel(); <-done }, nil
}
