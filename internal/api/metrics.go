package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/internal/quota"
)

// metrics counts and times requests by route pattern, method and status,
// counts the requests refused for an owner's quotas, and shows each
// owner's queue and usage (ownerStats).
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	refusals *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, st ownerStatsReader, now func() time.Time, log *slog.Logger) (*metrics, error) {
	labels := []string{"route", "method", "code"}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests (for streams: how long they stayed open), by route pattern, method and status code.",
			Buckets: prometheus.DefBuckets,
		}, labels),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_quota_refusals_total",
			Help: "Requests refused for an owner's quotas, by owner and reason (rate_limited, spend_limit, token_limit, or the cap's key: max_streams, max_chats, ...).",
		}, []string{"owner", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.refusals, newOwnerStats(st, now, log)} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	return m, nil
}

// refused counts err when it refuses a request for an owner's quota; any
// other error (nil too) is not counted.
func (m *metrics) refused(err error) {
	if owner, reason, ok := quota.Refusal(err); ok {
		m.refusals.WithLabelValues(owner, reason).Inc()
	}
}

// knownMethods bounds the method label.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

func (m *metrics) observe(route, method string, code int, d time.Duration) {
	if !knownMethods[method] {
		method = "OTHER"
	}
	c := strconv.Itoa(code)
	m.requests.WithLabelValues(route, method, c).Inc()
	m.duration.WithLabelValues(route, method, c).Observe(d.Seconds())
}

// statusWriter remembers the status code written and the error a handler
// answered with, for the request's metrics and log line.
type statusWriter struct {
	http.ResponseWriter
	code int
	err  error
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Status is the status code sent, 200 if the handler wrote nothing.
func (w *statusWriter) Status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Flush lets streaming handlers flush through the wrapper.
func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the underlying writer (write
// deadlines of streams).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
