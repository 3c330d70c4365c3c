package mcp

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/tool"
)

// states lists every session state, so the state gauge can zero the ones a
// server is not in.
var states = []string{tool.StateConnecting, tool.StateReady, tool.StateFailed}

// Metrics counts what happens to MCP sources, labelled by server name. One
// Metrics may serve every MCP server of a parley server; it is a
// prometheus.Collector, so register it where the server's metrics are served.
type Metrics struct {
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	state    *prometheus.GaugeVec
}

// NewMetrics returns zeroed metrics:
//
//   - parley_mcp_calls_total{server}: tools/call requests sent.
//   - parley_mcp_call_errors_total{server}: calls that ended in an error
//     result (isError, a JSON-RPC error, a timeout) or in a failure of the
//     session.
//   - parley_mcp_call_duration_seconds{server}: how long calls took, from
//     sending the request to its answer.
//   - parley_mcp_session_state{server,state}: 1 for the state the server's
//     session is in (connecting, ready, failed), 0 for the others.
func NewMetrics() *Metrics {
	return &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_mcp_calls_total",
			Help: "MCP tools/call requests sent.",
		}, []string{"server"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_mcp_call_errors_total",
			Help: "MCP tool calls that ended in an error result or a session failure.",
		}, []string{"server"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_mcp_call_duration_seconds",
			Help:    "Duration of MCP tool calls.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 9), // 5ms .. ~5.5min
		}, []string{"server"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "parley_mcp_session_state",
			Help: "1 for the state an MCP server's session is in (connecting, ready, failed), else 0.",
		}, []string{"server", "state"}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.calls.Describe(ch)
	m.errors.Describe(ch)
	m.duration.Describe(ch)
	m.state.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.calls.Collect(ch)
	m.errors.Collect(ch)
	m.duration.Collect(ch)
	m.state.Collect(ch)
}

// The methods below accept a nil *Metrics, which records nothing.

func (m *Metrics) callDone(server string, took time.Duration, failed bool) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(server).Inc()
	m.duration.WithLabelValues(server).Observe(took.Seconds())
	if failed {
		m.errors.WithLabelValues(server).Inc()
	}
}

func (m *Metrics) setState(server, state string) {
	if m == nil {
		return
	}
	for _, s := range states {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(server, s).Set(v)
	}
}
