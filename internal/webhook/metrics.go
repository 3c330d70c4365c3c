package webhook

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/internal/store"
)

// Metrics counts a deliverer's attempts and their outcomes, and shows how
// long the oldest due delivery has waited.
type Metrics struct {
	attempts   *prometheus.CounterVec
	deliveries *prometheus.CounterVec
	duration   prometheus.Histogram
}

// queueReader is what the queue-age gauge reads.
type queueReader interface {
	OldestDueDelivery(ctx context.Context) (time.Time, bool, error)
}

// NewMetrics registers the webhook metrics on reg; the queue age is read
// from st when scraped.
func NewMetrics(reg prometheus.Registerer, st queueReader) (*Metrics, error) {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_webhook_attempts_total",
			Help: "Webhook delivery attempts, by answer: the HTTP status class (2xx, 3xx, 4xx, 5xx) or error (no answer: timeout, refused or failed connection).",
		}, []string{"answer"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_webhook_deliveries_total",
			Help: "Webhook attempts by what became of the delivery: delivered, retry (another attempt is due later) or failed (no attempt left, or the endpoint answered 410).",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parley_webhook_attempt_duration_seconds",
			Help:    "Time of webhook delivery attempts, from the claim to the recorded outcome.",
			Buckets: prometheus.DefBuckets,
		}),
	}
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "parley_webhook_queue_age_seconds",
		Help: "How long the oldest due webhook delivery has been waiting (0 when none is due).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		due, ok, err := st.OldestDueDelivery(ctx)
		if err != nil || !ok {
			return 0
		}
		return max(time.Since(due).Seconds(), 0)
	})
	for _, c := range []prometheus.Collector{m.attempts, m.deliveries, m.duration, age} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("webhook: register metrics: %w", err)
		}
	}
	return m, nil
}

// observe counts one recorded attempt.
func (m *Metrics) observe(o store.DeliveryOutcome, a answer, d time.Duration) {
	if m == nil {
		return
	}
	class := "error"
	if a.err == nil && a.code > 0 {
		class = strconv.Itoa(a.code/100) + "xx"
	}
	m.attempts.WithLabelValues(class).Inc()
	result := o.Status
	if result == store.DeliveryPending {
		result = "retry"
	}
	m.deliveries.WithLabelValues(result).Inc()
	m.duration.Observe(d.Seconds())
}
