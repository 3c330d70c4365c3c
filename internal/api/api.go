// Package api serves parley's HTTP API: the chat routes under /api/v1, the
// owner's event feed over Server-Sent Events, and the unauthenticated
// /healthz, /readyz and /metrics, and mounts the OpenAI-compatible facade
// (internal/facade) under /v1/ and the web UI (internal/webui) at /.
//
// Handlers decode and check the request, call the service, and write JSON.
// Every error becomes the body {"error": {"code", "message", "details"}} in
// one place (errors.go).
//
// Every authenticated request counts against its token's rate limit, and
// every open stream against its owner's max_streams: both are held on each
// replica apart (quota.Gate), on the owners' limits cached for a few
// seconds; budgets and the other caps are checked in the database.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/facade"
	"github.com/parleyhq/parley/internal/follow"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tools"
)

// DefaultKeepAlive is the interval of SSE keep-alive comments when Deps sets none.
const DefaultKeepAlive = 15 * time.Second

// Deps is what the API needs.
type Deps struct {
	Config    *config.Config
	Store     store.Store
	PubSub    pubsub.PubSub
	Logger    *slog.Logger
	Registry  *prometheus.Registry // metrics registered here, served on /metrics
	KeepAlive time.Duration        // SSE keep-alive interval; 0 means 15s
	// TokenCheck is how often an open stream re-reads its token, to end
	// once the token is revoked; 0 means DefaultTokenCheck.
	TokenCheck time.Duration
	Tools      *tools.Registry // server-side tools; nil for none
	// Now is the clock of the per-token rate limits and of the cache of
	// owners' limits; nil means time.Now.
	Now func() time.Time
}

// api is the HTTP handler of New.
type api struct {
	cfg        *config.Config
	st         store.Store
	ps         pubsub.PubSub
	log        *slog.Logger
	svc        *service.Service
	reg        *prometheus.Registry
	metrics    *metrics
	keepAlive  time.Duration
	tokenCheck time.Duration
	// revocations ends streams whose token was revoked, one check per token.
	revocations *revocations
	tools       *tools.Registry
	facade      http.Handler // the OpenAI-compatible routes under /v1/
	gate        *quota.Gate  // this replica's rate limits and stream caps
	follower    *follow.Follower
	now         func() time.Time

	mux    *http.ServeMux
	routes map[string]bool // the registered patterns, the only route labels
}

// New returns the API's handler. Config, Store and PubSub are required; a
// nil Logger discards, a nil Registry is replaced by a new one.
func New(d Deps) (http.Handler, error) {
	if d.Config == nil || d.Store == nil || d.PubSub == nil {
		return nil, errors.New("api: Config, Store and PubSub are required")
	}
	a := &api{
		cfg:        d.Config,
		st:         d.Store,
		ps:         d.PubSub,
		log:        d.Logger,
		reg:        d.Registry,
		keepAlive:  d.KeepAlive,
		tokenCheck: d.TokenCheck,
		tools:      d.Tools,
		mux:        http.NewServeMux(),
		routes:     map[string]bool{},
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now = d.Now; a.now == nil {
		a.now = time.Now
	}
	a.gate = quota.NewGate(d.Store, d.Config.Quotas.Defaults, a.now)
	if a.reg == nil {
		a.reg = prometheus.NewRegistry()
	}
	if a.keepAlive <= 0 {
		a.keepAlive = DefaultKeepAlive
	}
	if a.tokenCheck <= 0 {
		a.tokenCheck = DefaultTokenCheck
	}
	a.revocations = newRevocations(a.tokenCheck, a.tokenRevoked)
	m, err := newMetrics(a.reg, d.Store, a.now, a.log)
	if err != nil {
		return nil, err
	}
	a.metrics = m
	var opts []service.Option
	if d.Tools != nil {
		opts = append(opts, service.WithServerTools(d.Tools))
	}
	a.svc = service.New(d.Store, d.PubSub, d.Config, a.log, opts...)
	a.follower = follow.New(d.PubSub, a.svc, d.Store, a.log)
	fc, err := facade.New(facade.Deps{Config: d.Config, Store: d.Store, PubSub: d.PubSub, Service: a.svc,
		Tools: d.Tools, Logger: a.log, KeepAlive: a.keepAlive, Gate: a.gate, Follower: a.follower, Refused: a.metrics.refused,
		Agents: facade.AgentsFunc(a.agentModels)})
	if err != nil {
		return nil, err
	}
	a.facade = fc
	a.register()
	return a, nil
}

// agentModels lists the agents owner may run, as the OpenAI facade offers
// them as models ("agent:<name>").
func (a *api) agentModels(ctx context.Context, owner string) ([]facade.AgentModel, error) {
	all, err := a.svc.ListAgents(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := make([]facade.AgentModel, len(all))
	for i, ag := range all {
		out[i] = facade.AgentModel{Name: ag.Name, Model: ag.Model}
	}
	return out, nil
}

// ServeHTTP routes the request, answers unknown routes and wrong methods with
// the error body, and records the request's metrics and log line.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	_, pattern := a.mux.Handler(r)
	route := pattern
	var out http.ResponseWriter = sw
	if !a.routes[pattern] {
		route = "unmatched"
		out = &muxErrorWriter{statusWriter: sw, r: r}
	}
	a.cors(a.mux).ServeHTTP(out, r)

	code := sw.Status()
	elapsed := time.Since(start)
	a.metrics.observe(route, r.Method, code, elapsed)
	a.metrics.refused(sw.err)
	level := slog.LevelDebug
	if code >= 500 {
		level = slog.LevelError
	}
	attrs := []any{"method", r.Method, "path", r.URL.Path, "route", route, "status", code, "duration", elapsed}
	if sw.err != nil {
		attrs = append(attrs, "err", sw.err)
	}
	a.log.Log(r.Context(), level, "http request", attrs...)
}
