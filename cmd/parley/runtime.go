package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/catalog"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/internal/tools/builtin"
	"github.com/parleyhq/parley/internal/tools/lua"
	"github.com/parleyhq/parley/internal/tools/mcp"
)

// newTools registers the server-side tools of the configuration, under its
// approval policy; their metrics go to metrics.
func newTools(cfg *config.Config, log *slog.Logger, metrics prometheus.Registerer) (*tools.Registry, error) {
	reg := tools.NewRegistry(log)
	if err := reg.SetApprovalPolicy(approvalPolicy(cfg.Tools)); err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
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
	if err := addMCPServers(reg, cfg.Tools.MCP, log, metrics); err != nil {
		reg.Close()
		return nil, err
	}
	return reg, nil
}

// checkAgentTools checks the configuration file's agents against the
// server-side tools just loaded (config.CheckAgentTools): a clash refuses
// the start; a glob that matches no tool is logged.
func checkAgentTools(cfg *config.Config, reg *tools.Registry, log *slog.Logger) error {
	warnings, err := cfg.CheckAgentTools(reg.Names())
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	for _, w := range warnings {
		log.Warn("agent tool glob matches no server-side tool", "warning", w)
	}
	return nil
}

// approvalPolicy is the configured approval policy: each Lua source's and
// MCP server's approval (none: never), overridden per tool by the
// tools.approval rules, in order.
func approvalPolicy(tc config.Tools) tools.ApprovalPolicy {
	p := tools.ApprovalPolicy{Sources: map[string]string{}}
	for _, s := range tc.Lua {
		if s.Approval != "" {
			p.Sources[s.Name] = s.Approval
		}
	}
	for _, s := range tc.MCP {
		if s.Approval != "" {
			p.Sources[s.Name] = s.Approval
		}
	}
	for _, r := range tc.Approval {
		p.Rules = append(p.Rules, tools.ApprovalRule{Match: r.Match, Approval: r.Approval})
	}
	return p
}

// addMCPServers opens a source per configured MCP server and waits, for all
// of them at once, until each has connected or failed its first attempt. A
// server that is down does not stop the start: its tools are absent and it
// keeps reconnecting. A tool name that clashes with another server-side
// tool does.
func addMCPServers(reg *tools.Registry, servers []config.MCPServer, log *slog.Logger, metrics prometheus.Registerer) error {
	if len(servers) == 0 {
		return nil
	}
	m := mcp.NewMetrics()
	if err := metrics.Register(m); err != nil {
		return fmt.Errorf("register MCP metrics: %w", err)
	}
	opts := mcp.Options{Logger: log.With("component", "mcp"), Metrics: m}
	srcs := make([]*mcp.Source, len(servers))
	var wg sync.WaitGroup
	for i, sc := range servers {
		srcs[i] = mcp.Open(mcpConfig(sc), opts)
		wait := time.Duration(sc.ConnectTimeout)
		if wait == 0 {
			wait = mcp.DefaultConnectTimeout
		}
		wg.Go(func() {
			// The source logs how its attempts end. The start waits no
			// longer than one connect timeout: a stdio command's first
			// start may take minutes (a package download), and its tools
			// are added when it connects.
			ctx, cancel := context.WithTimeout(context.Background(), wait+time.Second)
			defer cancel()
			if err := srcs[i].WaitConnected(ctx); err != nil && ctx.Err() != nil {
				opts.Logger.Info("mcp server: still starting; serving without its tools until it connects", "mcp_server", sc.Name)
			}
		})
	}
	wg.Wait()
	for i, src := range srcs {
		if err := reg.AddSource(context.Background(), src); err != nil {
			for _, s := range srcs[i:] {
				s.Close()
			}
			return fmt.Errorf("tools.mcp: %w", err)
		}
	}
	return nil
}

// mcpConfig is a configured server as the MCP source takes it.
func mcpConfig(sc config.MCPServer) mcp.Config {
	return mcp.Config{
		Name: sc.Name, Command: sc.Command, Env: sc.ChildEnv, Dir: sc.Dir,
		URL: sc.URL, Headers: sc.Headers, BearerToken: sc.BearerToken,
		Allow: sc.Allow, Deny: sc.Deny, MaxConcurrency: sc.MaxConcurrency,
		CallTimeout: time.Duration(sc.CallTimeout), ConnectTimeout: time.Duration(sc.ConnectTimeout),
		FirstConnectTimeout: time.Duration(sc.FirstConnectTimeout),
	}
}

// startEngine starts this process's workers on the given models; the
// returned function stops them, handing running chats back, and waits until
// they are let go.
func startEngine(ctx context.Context, cfg *config.Config, models *catalog.Catalog, st store.Store, ps pubsub.PubSub, reg *tools.Registry, log *slog.Logger) (stop func()) {
	ec := engine.DefaultConfig()
	ec.Concurrency = cfg.Engine.Concurrency
	ec.LeaseTTL = time.Duration(cfg.Engine.LeaseTTL)
	ec.Heartbeat = time.Duration(cfg.Engine.Heartbeat)
	ec.PollInterval = time.Duration(cfg.Engine.PollInterval)
	ec.MaxRecoveries = cfg.Engine.MaxRecoveries
	ec.MaxSteps = cfg.Limits.MaxSteps
	ec.MaxRepairs = cfg.StructuredOutput.MaxRepairs
	if ec.MaxRepairs == 0 {
		ec.MaxRepairs = -1 // none: the engine's zero is its default
	}
	ec.ToolResultTimeout = time.Duration(cfg.Limits.ToolResultTimeout)
	ec.Budget = &quota.Budget{Defaults: cfg.Quotas.Defaults}
	ec.Files = st // the bytes of the files each model call sends
	eng := engine.New(ec, st, ps, models, tools.NewDispatcher(reg, tools.Options{MaxResultBytes: cfg.Tools.MaxResultBytes}, log), log.With("component", "engine"))

	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := eng.Run(ctx); err != nil {
			log.Error("engine stopped", "err", err)
		}
	}()
	log.Info("engine started", "worker", eng.WorkerID(), "concurrency", ec.Concurrency)
	return func() { cancel(); <-done }
}
