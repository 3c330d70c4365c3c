// Package postgres is the PubSub shared by replicas on one PostgreSQL
// database: it publishes with pg_notify and receives with LISTEN on one
// dedicated connection, which it re-establishes by itself.
//
// Every replica listens on one channel and dispatches by topic to its local
// subscribers. A replica delivers its own messages to its local subscribers
// directly and ignores their echo. A payload too large for a notification is
// stored in the pubsub_payloads table (created by the store's migrations) and
// the notification carries its id; rows are deleted after a few minutes.
package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/internal/pubsub"
)

// Defaults of the options.
const (
	DefaultChannel         = "parley"
	DefaultApplicationName = "parley-pubsub"
	DefaultPayloadTTL      = 5 * time.Minute
	DefaultCleanupInterval = time.Minute
)

// PubSub is a pubsub.PubSub over PostgreSQL LISTEN/NOTIFY.
type PubSub struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	opts   options
	origin string // tells this instance's notifications from others'
	// ownPrefix starts the text of every notification this instance sends
	// (frame's first field is its origin).
	ownPrefix string
	listen    *pgx.ConnConfig
	hub       *pubsub.Hub

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

var (
	_ pubsub.Stager         = (*PubSub)(nil)
	_ pubsub.LocalPublisher = (*PubSub)(nil)
)

// Option configures New.
type Option func(*options)

type options struct {
	channel         string
	applicationName string
	bufferSize      int
	payloadTTL      time.Duration
	cleanupInterval time.Duration
}

// WithChannel sets the NOTIFY channel (default DefaultChannel). Replicas
// that share messages must use the same channel; channels are database-wide,
// so separate deployments (or tests) on one database need different ones.
func WithChannel(name string) Option { return func(o *options) { o.channel = name } }

// WithApplicationName sets the application_name of the listening connection
// (default DefaultApplicationName), which identifies it in pg_stat_activity.
func WithApplicationName(name string) Option {
	return func(o *options) { o.applicationName = name }
}

// WithBufferSize sets how many messages a subscription holds before it is
// ended with pubsub.ErrLagged (default pubsub.DefaultBufferSize).
func WithBufferSize(n int) Option { return func(o *options) { o.bufferSize = n } }

// WithPayloadTTL sets how long a large payload is kept for other replicas to
// fetch (default DefaultPayloadTTL).
func WithPayloadTTL(d time.Duration) Option { return func(o *options) { o.payloadTTL = d } }

// WithCleanupInterval sets how often expired large payloads are deleted
// (default DefaultCleanupInterval).
func WithCleanupInterval(d time.Duration) Option {
	return func(o *options) { o.cleanupInterval = d }
}

// New connects the listening connection (with the pool's settings, outside
// the pool) and starts receiving. ctx bounds only the connection; the
// PubSub runs until Close.
func New(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, opts ...Option) (*PubSub, error) {
	o := options{
		channel:         DefaultChannel,
		applicationName: DefaultApplicationName,
		payloadTTL:      DefaultPayloadTTL,
		cleanupInterval: DefaultCleanupInterval,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.channel == "" {
		return nil, fmt.Errorf("pubsub: empty channel name")
	}
	if o.payloadTTL <= 0 || o.cleanupInterval <= 0 {
		return nil, fmt.Errorf("pubsub: payload TTL and cleanup interval must be positive")
	}
	listen := pool.Config().ConnConfig // a copy: changing it leaves the pool alone
	if listen.RuntimeParams == nil {
		listen.RuntimeParams = make(map[string]string)
	}
	listen.RuntimeParams["application_name"] = o.applicationName
	origin := rand.Text() // base32: needs no escaping in JSON
	p := &PubSub{
		pool:      pool,
		log:       log.With("component", "pubsub", "channel", o.channel),
		opts:      o,
		origin:    origin,
		ownPrefix: framePrefix(origin),
		listen:    listen,
		hub:       pubsub.NewHub(o.bufferSize),
	}
	conn, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(2)
	go p.receiveLoop(runCtx, conn)
	go p.cleanupLoop(runCtx)
	return p, nil
}

// Publish delivers payload to this replica's subscribers at once and
// notifies the other replicas. Payloads of any size are carried intact.
func (p *PubSub) Publish(ctx context.Context, topic string, payload []byte) error {
	return p.PublishBatch(ctx, []pubsub.Message{{Topic: topic, Payload: payload}})
}

// PublishBatch delivers msgs to this replica's subscribers at once and
// notifies the other replicas of all of them in one statement (one round
// trip, unless payloads are large enough to be stored by reference), in as
// few notifications as they fit in.
func (p *PubSub) PublishBatch(ctx context.Context, msgs []pubsub.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	notes, err := p.notes(ctx, msgs, p.storePayload)
	if err != nil {
		return err
	}
	if err := p.deliver(msgs); err != nil {
		return err
	}
	// The statement is a transaction of its own that changes no data, so its
	// commit need not wait for the WAL to reach the disk: listeners hear of
	// it at commit either way, and a crash loses nothing but the hint.
	_, err = p.pool.Exec(ctx, `SELECT pg_notify($1, n)
		FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async,
			unnest($2::text[]) WITH ORDINALITY AS t(n, i) ORDER BY i`,
		p.opts.channel, notes)
	if err != nil {
		return fmt.Errorf("publish %d messages: notify: %w", len(notes), err)
	}
	return nil
}

// PublishLocal delivers payload to this replica's subscribers only; the
// other replicas are not told, and no round trip is made. It fails once the
// PubSub is closed.
func (p *PubSub) PublishLocal(topic string, payload []byte) error {
	return p.deliver([]pubsub.Message{{Topic: topic, Payload: payload}})
}

// Stage queues msgs in the transaction ob, which notifies the other
// replicas when it commits, and returns the function that delivers them to
// this replica's subscribers after the commit. Large payloads are stored in
// the transaction too.
func (p *PubSub) Stage(ctx context.Context, ob pubsub.Outbox, msgs []pubsub.Message) (deliver func(), err error) {
	notes, err := p.notes(ctx, msgs, ob.StorePayload)
	if err != nil {
		return nil, err
	}
	for _, n := range notes {
		ob.Notify(p.opts.channel, n)
	}
	// After a Close there is nobody left to deliver to.
	return func() { _ = p.deliver(msgs) }, nil
}

// deliver hands msgs to this replica's subscribers (their echo from the
// database is ignored); it fails once the PubSub is closed.
func (p *PubSub) deliver(msgs []pubsub.Message) error {
	for _, m := range msgs {
		if err := p.hub.Publish(m.Topic, m.Payload); err != nil {
			return fmt.Errorf("publish on %q: %w", m.Topic, err)
		}
	}
	return nil
}

// Subscribe starts delivering the topic's messages, from every replica,
// until ctx is done or the subscription is closed.
func (p *PubSub) Subscribe(ctx context.Context, topic string) (pubsub.Subscription, error) {
	s, err := p.hub.Subscribe(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %q: %w", topic, err)
	}
	return s, nil
}

// Close ends every subscription, stops receiving and closes the listening
// connection. It is safe to call more than once.
func (p *PubSub) Close() error {
	p.closeOnce.Do(func() {
		p.cancel()
		p.hub.Close()
		p.wg.Wait()
	})
	return nil
}
