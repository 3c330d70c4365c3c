package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/catalog"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/internal/tools/builtin"
	"github.com/parleyhq/parley/internal/tools/lua"
)

// newTools registers the server-side tools of the configuration; their
// metrics go to metrics.
func newTools(cfg *config.Config, log *slog.Logger, metrics prometheus.Registerer) (*tools.Registry, error) {
	reg := tools.NewRegistry(log)
	opts := builtin.Options{HTTPFetch: builtin.HTTPFetchOptions{
		AllowPrivate: cfg.Tools.HTTPFetch.AllowPrivate,
		AllowHosts:   cfg.Tools.HTTPFetch.AllowHosts,
	}}
	for _, t := range builtin.Tools(opts) {
		if err := reg.AddTool(t); err != nil {
			return nil, fmt.Errorf("register built-in tools: %w", err)
		}
	}
	lr := cfg.Tools.LuaRuntime
	luaMetrics := lua.NewMetrics()
	if err := metrics.Register(luaMetrics); err != nil {
		return nil, fmt.Errorf("register Lua metrics: %w", err)
	}
	luaOpts := lua.Options{
		Logger:           log.With("component", "lua"),
		Metrics:          luaMetrics,
		CallTimeout:      time.Duration(lr.CallTimeout),
		BatchTimeout:     time.Duration(lr.BatchTimeout),
		HTTPTimeout:      time.Duration(lr.HTTPTimeout),
		MaxResponseBytes: lr.MaxResponseBytes,
		AllowHosts:       lr.HTTPAllowHosts,
		ReloadInterval:   time.Duration(lr.ReloadInterval),
	}
	for _, sc := range cfg.Tools.Lua {
		src, err := lua.Open(sc.Name, sc.Path, luaOpts)
		if err == nil {
			err = reg.AddSource(context.Background(), src)
			if err != nil {
				src.Close()
			}
		}
		if err != nil {
			reg.Close()
			return nil, fmt.Errorf("tools.lua: %w", err)
		}
		log.Info("Lua tool source loaded", "source", sc.Name, "path", sc.Path)
	}
	return reg, nil
}

// startEngine starts this process's workers; the returned function stops
// them, handing running chats back, and waits until they are let go.
func startEngine(ctx context.Context, cfg *config.Config, getenv func(string) string, st store.Store, ps pubsub.PubSub, reg *tools.Registry, log *slog.Logger) (stop func(), err error) {
	models, err := catalog.New(cfg, getenv)
	if err != nil {
		return nil, err
	}
	ec := engine.DefaultConfig()
	ec.Concurrency = cfg.Engine.Concurrency
	ec.LeaseTTL = time.Duration(cfg.Engine.LeaseTTL)
	ec.Heartbeat = time.Duration(cfg.Engine.Heartbeat)
	ec.PollInterval = time.Duration(cfg.Engine.PollInterval)
	ec.MaxRecoveries = cfg.Engine.MaxRecoveries
	ec.MaxSteps = cfg.Limits.MaxSteps
	ec.ToolResultTimeout = time.Duration(cfg.Limits.ToolResultTimeout)
	eng := engine.New(ec, st, ps, models, tools.NewDispatcher(reg, tools.Options{}, log), log.With("component", "engine"))

	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := eng.Run(ctx); err != nil {
			log.Error("engine stopped", "err", err)
		}
	}()
	log.Info("engine started", "worker", eng.WorkerID(), "concurrency", ec.Concurrency)
	return func() { cancel(); <-done }, nil
}
