package lua

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts what happens to Lua sources, labelled by source name. One
// Metrics may serve every source of a server; it is a prometheus.Collector,
// so register it where the server's metrics are served.
type Metrics struct {
	runaways  *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	abandoned *prometheus.GaugeVec
}

// NewMetrics returns zeroed counters:
//
//   - parley_lua_runaways_total{source}: calls stopped by a time limit while
//     their Lua code was running (a loop that never waits, say); each one
//     rebuilds the source's state from its scripts.
//   - parley_lua_reloads_total{source,result}: changed scripts seen, by
//     result "ok" or "error" (the previous scripts stay in use).
//   - parley_lua_abandoned_states{source}: states abandoned while stuck in
//     code that cannot be interrupted whose goroutine still runs.
func NewMetrics() *Metrics {
	return &Metrics{
		runaways: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_lua_runaways_total",
			Help: "Lua calls stopped by a time limit while running; each rebuilds the source's state.",
		}, []string{"source"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_lua_reloads_total",
			Help: "Changed Lua scripts loaded (result ok) or refused (result error).",
		}, []string{"source", "result"}),
		abandoned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "parley_lua_abandoned_states",
			Help: "Lua states abandoned while stuck in code that cannot be interrupted, whose goroutine still runs.",
		}, []string{"source"}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.runaways.Describe(ch)
	m.reloads.Describe(ch)
	m.abandoned.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.runaways.Collect(ch)
	m.reloads.Collect(ch)
	m.abandoned.Collect(ch)
}
