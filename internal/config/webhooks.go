package config

import (
	"fmt"
	"time"
)

// Webhooks configures the delivery of webhook events (docs/webhooks.md).
type Webhooks struct {
	// RetrySchedule is the delay before each retry of a failed attempt;
	// after the last one the delivery is failed. Empty: one attempt.
	RetrySchedule []Duration `yaml:"retry_schedule"`
	// AllowPrivate lets endpoints be private, loopback or link-local
	// addresses (refused by default, as for http_fetch).
	AllowPrivate bool `yaml:"allow_private"`
	// MaxConsecutiveFailures disables an endpoint whose deliveries failed
	// this many times in a row (every attempt of each failed); 0: never.
	MaxConsecutiveFailures int `yaml:"max_consecutive_failures"`
	// Timeout bounds one attempt: an answer not received within it is a
	// failed attempt. An endpoint claimed by a replica that died is taken
	// again after twice this.
	Timeout Duration `yaml:"timeout"`
}

// Bounds of the webhooks settings.
const (
	maxRetries    = 20
	maxRetryDelay = 7 * 24 * time.Hour
	minTimeout    = time.Second
	maxTimeout    = time.Minute
)

// defaultWebhooks is the Webhooks of Default.
func defaultWebhooks() Webhooks {
	var schedule []Duration
	for _, d := range []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
		5 * time.Hour, 10 * time.Hour, 24 * time.Hour} {
		schedule = append(schedule, Duration(d))
	}
	return Webhooks{RetrySchedule: schedule, MaxConsecutiveFailures: 10, Timeout: Duration(15 * time.Second)}
}

// Schedule returns RetrySchedule as durations.
func (w Webhooks) Schedule() []time.Duration {
	out := make([]time.Duration, len(w.RetrySchedule))
	for i, d := range w.RetrySchedule {
		out[i] = time.Duration(d)
	}
	return out
}

func (w Webhooks) check() error {
	if len(w.RetrySchedule) > maxRetries {
		return fmt.Errorf("webhooks.retry_schedule: %d retries; at most %d", len(w.RetrySchedule), maxRetries)
	}
	for i, d := range w.RetrySchedule {
		if d <= 0 || time.Duration(d) > maxRetryDelay {
			return fmt.Errorf("webhooks.retry_schedule[%d] %s: want a delay above 0 and at most 168h (7 days)", i, time.Duration(d))
		}
	}
	if w.MaxConsecutiveFailures < 0 {
		return fmt.Errorf("webhooks.max_consecutive_failures %d: want 0 (never disable) or more", w.MaxConsecutiveFailures)
	}
	if t := time.Duration(w.Timeout); t < minTimeout || t > maxTimeout {
		return fmt.Errorf("webhooks.timeout %s: want 1s to 1m", t)
	}
	return nil
}
