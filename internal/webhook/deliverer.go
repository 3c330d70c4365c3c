package webhook

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/netguard"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/store"
)

// Defaults of Config.
const (
	DefaultTimeout      = 15 * time.Second
	DefaultPollInterval = 2 * time.Second
	DefaultConcurrency  = 16
	// DefaultRetention is how long ended deliveries (and the events
	// they sent) are kept.
	DefaultRetention = 30 * 24 * time.Hour
)

// pruneEvery is how often a deliverer deletes what outlived the retention.
const pruneEvery = time.Hour

// Store is what a Deliverer needs of the store.
type Store interface {
	GetChat(ctx context.Context, id string) (chat.Chat, error)
	TurnThrough(ctx context.Context, chatID string, through int64) ([]chat.Message, error)
	ClaimDeliveries(ctx context.Context, c store.Claim) ([]store.DeliveryBatch, error)
	SetEventBodies(ctx context.Context, bodies map[string][]byte) (map[string][]byte, error)
	FinishDeliveries(ctx context.Context, o store.BatchOutcome) error
	PruneWebhooks(ctx context.Context, before time.Time, limit int) (int, error)
}

// Config is a Deliverer's.
type Config struct {
	Store  Store
	PubSub pubsub.PubSub // wake-ups (events.WebhookTopic); nil: poll only
	Log    *slog.Logger  // nil discards
	// WorkerID names this deliverer's claims; unique per replica ("" makes
	// one of the host name, the process id and a random part).
	WorkerID string
	Policy   Policy
	// Timeout bounds one attempt (DefaultTimeout if 0). A claim lasts
	// twice as long, so a crashed deliverer's endpoints are taken again
	// soon after.
	Timeout      time.Duration
	PollInterval time.Duration // fallback poll (DefaultPollInterval if 0)
	Concurrency  int           // endpoints served at once (DefaultConcurrency if 0)
	Retention    time.Duration // ended deliveries kept (DefaultRetention if 0)
	Tools        Describer     // describes calls waiting for approval; nil: none
	Metrics      *Metrics      // nil: none
}

// Deliverer sends the due deliveries of every replica's outbox: woken by
// chat changes, and polling as a fallback. It claims endpoints, each with
// a batch of its oldest due deliveries, and sends each batch one delivery
// at a time, in order, several endpoints at once. Several deliverers (one
// per replica) share the work through the store's claims.
type Deliverer struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
	policy Policy
	claims atomic.Int64  // numbers this deliverer's claims
	done   chan struct{} // a batch ended: its endpoint may have more
}

// WorkerID returns the id its claims are leased to.
func (d *Deliverer) WorkerID() string { return d.cfg.WorkerID }

// New returns a Deliverer; Run starts it.
func New(cfg Config) (*Deliverer, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("webhook: Store is required")
	}
	if cfg.WorkerID == "" {
		host, _ := os.Hostname()
		cfg.WorkerID = fmt.Sprintf("webhooks-%s-%d-%s", host, os.Getpid(), hex.EncodeToString(random(4)))
	}
	if err := cfg.Policy.check(); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	guard := netguard.NewPolicy(cfg.Policy.AllowPrivate, nil)
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would connect on our behalf, past the address check
		DialContext:           guard.Dialer(net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	client := &http.Client{
		Transport: transport,
		Timeout:   cfg.Timeout,
		// A redirect is not followed: the 3xx is the attempt's answer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Deliverer{cfg: cfg, log: log.With("component", "webhooks", "worker", cfg.WorkerID),
		client: client, policy: cfg.Policy, done: make(chan struct{}, 1)}, nil
}

// batchSize bounds the deliveries of an endpoint one claim takes: the
// store is written once per batch, and a deliverer killed mid-batch sends
// at most this many again.
const batchSize = 50

// Run delivers until ctx ends, then waits for the attempts in flight
// (each bounded by the timeout; those cut short by the end of ctx are
// retried).
func (d *Deliverer) Run(ctx context.Context) {
	var inflight sync.WaitGroup
	defer inflight.Wait()
	slots := make(chan struct{}, d.cfg.Concurrency)
	wake := d.subscribe(ctx)
	tick := time.NewTicker(d.cfg.PollInterval)
	defer tick.Stop()
	prune := time.NewTicker(pruneEvery)
	defer prune.Stop()
	d.prune(ctx)
	for {
		d.fill(ctx, slots, &inflight)
		select {
		case <-ctx.Done():
			return
		case _, ok := <-wake:
			if !ok {
				wake = d.subscribe(ctx)
			}
		case <-tick.C:
		case <-d.done:
		case <-prune.C:
			d.prune(ctx)
		}
	}
}

// pruneBatch bounds the rows one prune statement deletes.
const pruneBatch = 1000

// prune deletes the deliveries that ended more than the retention ago and
// the events left without deliveries, a batch at a time.
func (d *Deliverer) prune(ctx context.Context) {
	before := time.Now().Add(-d.cfg.Retention)
	for ctx.Err() == nil {
		n, err := d.cfg.Store.PruneWebhooks(ctx, before, pruneBatch)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("prune webhook deliveries", "err", err)
			}
			return
		}
		if n < pruneBatch {
			return
		}
	}
}

// subscribe returns the wake-up channel; a failure to subscribe leaves the
// poll alone, and a channel that never delivers.
func (d *Deliverer) subscribe(ctx context.Context) <-chan pubsub.Message {
	if d.cfg.PubSub == nil || ctx.Err() != nil {
		return nil
	}
	sub, err := d.cfg.PubSub.Subscribe(ctx, events.WebhookTopic)
	if err != nil {
		d.log.Warn("webhook wake-ups unavailable; polling", "err", err)
		return nil
	}
	return sub.C()
}

// fill claims endpoints with due deliveries for the free slots and starts
// their batches, until no slot is free or nothing is due.
func (d *Deliverer) fill(ctx context.Context, slots chan struct{}, inflight *sync.WaitGroup) {
	for ctx.Err() == nil {
		free := cap(slots) - len(slots)
		if free == 0 {
			return
		}
		c := store.Claim{ID: fmt.Sprintf("%s/%d", d.cfg.WorkerID, d.claims.Add(1)), TTL: 2 * d.cfg.Timeout,
			Max: free, Batch: batchSize}
		// A batch starts no attempt once half the timeout has passed since
		// the claim, so its last attempt and the write of its outcomes end
		// within the claim.
		until := time.Now().Add(d.cfg.Timeout / 2)
		batches, err := d.cfg.Store.ClaimDeliveries(ctx, c)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("claim webhook deliveries", "err", err)
			}
			return
		}
		for _, b := range batches {
			slots <- struct{}{}
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				defer func() {
					<-slots
					select {
					case d.done <- struct{}{}:
					default:
					}
				}()
				d.deliver(ctx, c.ID, until, b)
			}()
		}
		if len(batches) < free {
			return
		}
	}
}
