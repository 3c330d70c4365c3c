// Package engine runs chats: workers acquire pending chats from the store
// under a lease, run the model-and-tools loop step by step, and let go when
// the chat is idle, needs the client's tool results, or fails
// (docs/architecture.md). Every write a worker makes is fenced by its lease, so a
// worker that lost its chat writes nothing more; any replica recovers a chat
// whose worker died.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tools"
)

// Config tunes the engine. Zero fields take the defaults of DefaultConfig.
type Config struct {
	WorkerID          string        // unique per process; generated when empty
	Concurrency       int           // chats this process runs at once
	LeaseTTL          time.Duration // how long a lease lasts without renewal
	Heartbeat         time.Duration // how often a running chat's lease is renewed
	PollInterval      time.Duration // fallback for lost wake-ups, lease recovery and deadlines
	MaxSteps          int           // model calls per run
	ToolResultTimeout time.Duration // default requires_action deadline
	Retry             llm.RetryPolicy
	DeltaFlush        time.Duration // how long deltas are batched before publishing
	// WriteTimeout bounds each write of a run, every attempt included:
	// past it, a database that is down or hangs ends the run, and the
	// chat's lease, left to expire, brings it back once the database does.
	WriteTimeout time.Duration
	// MaxRecoveries: a chat whose lease was recovered this many times in a
	// row ends in error instead of running again: its run keeps killing
	// the workers that take it.
	MaxRecoveries int
	// MaxRepairs is how many times a turn's final answer that is not
	// valid against the turn's format goes back to the model to repair
	// before the chat ends in error; negative: none (0: the default).
	MaxRepairs int
	// Budget holds the owners' quotas (its Defaults, with each owner's
	// overrides): a run stops before a model call once the chat owner's
	// spend or token budget is reached, and AcquireChats starts no more
	// than max_running chats of an owner. nil: no quotas.
	Budget *quota.Budget
	// Files reads the stored files that user messages attach, whose bytes
	// each model call sends (the store). nil: files are not sent, and the
	// model reads that they are not available.
	Files FileSource
}

// DefaultConfig returns the defaults (docs/configuration.md).
func DefaultConfig() Config {
	return Config{
		Concurrency:       64,
		LeaseTTL:          15 * time.Second,
		Heartbeat:         5 * time.Second,
		PollInterval:      2 * time.Second,
		MaxSteps:          50,
		ToolResultTimeout: 10 * time.Minute,
		Retry:             llm.DefaultRetryPolicy(),
		DeltaFlush:        2 * time.Millisecond,
		WriteTimeout:      10 * time.Second,
		MaxRecoveries:     3,
		MaxRepairs:        2,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if c.Concurrency <= 0 {
		c.Concurrency = d.Concurrency
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = d.LeaseTTL
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = d.Heartbeat
	}
	if c.PollInterval <= 0 {
		c.PollInterval = d.PollInterval
	}
	if c.MaxSteps <= 0 {
		c.MaxSteps = d.MaxSteps
	}
	if c.ToolResultTimeout <= 0 {
		c.ToolResultTimeout = d.ToolResultTimeout
	}
	if c.Retry.MaxAttempts == 0 {
		c.Retry = d.Retry
	}
	if c.DeltaFlush <= 0 {
		c.DeltaFlush = d.DeltaFlush
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.MaxRecoveries <= 0 {
		c.MaxRecoveries = d.MaxRecoveries
	}
	switch {
	case c.MaxRepairs == 0:
		c.MaxRepairs = d.MaxRepairs
	case c.MaxRepairs < 0:
		c.MaxRepairs = 0
	}
	return c
}

// Models resolves the model name a chat was created with.
type Models interface {
	Model(name string) (llm.Model, bool)
}

// Tools offers the server-side tools and runs a step's calls
// (*tools.Dispatcher).
type Tools interface {
	Decls(ctx context.Context) []tools.Decl
	Run(ctx context.Context, step tools.Step) tools.Outcome
}

// Engine runs this process's workers. Create it with New; Run blocks.
type Engine struct {
	cfg    Config
	st     store.Store
	ps     pubsub.PubSub
	models Models
	tools  Tools
	log    *slog.Logger

	slots chan struct{} // one token per chat this process may run
	kick  chan struct{} // wakes the acquire loop; holds at most one kick
	wg    sync.WaitGroup
	ids   idBlock
	// lastOutage is when this engine last found the database out of reach
	// (UnixNano; 0: never): unavailable, outage.
	lastOutage atomic.Int64

	// session is the context runs start under while this worker is known
	// to live (its liveness held, or a store without liveness): nil while
	// it is not, when nothing is acquired. Losing liveness cancels it, and
	// the runs under it stop, writing nothing more (setAlive).
	mu      sync.Mutex
	session context.Context
	endSess context.CancelCauseFunc
	worker  string // the worker id of the session's leases
}

// New returns an engine; tl may be nil (no server-side tools).
func New(cfg Config, st store.Store, ps pubsub.PubSub, models Models, tl Tools, log *slog.Logger) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if tl == nil {
		tl = tools.NewDispatcher(tools.NewRegistry(log), tools.Options{}, log)
	}
	cfg = cfg.withDefaults()
	e := &Engine{cfg: cfg, st: st, ps: ps, models: models, tools: tl,
		log:   log.With("worker", cfg.WorkerID),
		slots: make(chan struct{}, cfg.Concurrency), kick: make(chan struct{}, 1)}
	return e
}

// WorkerID is the id this engine's leases carry.
func (e *Engine) WorkerID() string { return e.cfg.WorkerID }

// Run acquires and runs pending chats until ctx is done. It wakes on the work
// topic and polls every PollInterval, when it also recovers expired leases
// and expires requires_action deadlines. When ctx is done it hands every
// chat it runs back (pending) and returns once they are all let go.
func (e *Engine) Run(ctx context.Context) error {
	wake, err := e.ps.Subscribe(ctx, events.WorkTopic)
	if err != nil {
		return fmt.Errorf("engine: subscribe to wake-ups: %w", err)
	}
	defer func() {
		if wake != nil {
			wake.Close()
		}
	}()
	runs, stopRuns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRuns(errShutdown)
	poll := time.NewTicker(e.cfg.PollInterval)
	defer poll.Stop()

	if lv, ok := e.st.(liveness); ok {
		// Held until the runs are all let go, after the loop below.
		held, release := context.WithCancel(context.WithoutCancel(ctx))
		var live sync.WaitGroup
		live.Go(func() { e.holdLiveness(held, runs, lv) })
		live.Go(func() { e.recoverDeadWorkers(ctx, lv) })
		defer func() { release(); live.Wait() }() // nothing of it outlives Run
	} else {
		e.setAlive(runs, e.cfg.WorkerID)
	}
	e.maintain(ctx)
	acquired := make(chan struct{})
	go func() { defer close(acquired); e.acquireLoop(ctx, runs) }()
	e.kickAcquirer()
	for {
		select {
		case <-ctx.Done():
			<-acquired // no run starts after this
			stopRuns(errShutdown)
			e.wg.Wait()
			return nil
		case _, ok := <-wakeups(wake):
			if !ok { // lagged or closed: resubscribe, and poll meanwhile
				wake.Close()
				wake = e.resubscribe(ctx)
			}
			e.kickAcquirer()
		case <-poll.C:
			if wake == nil {
				wake = e.resubscribe(ctx)
			}
			e.maintain(ctx)
			e.kickAcquirer()
		}
	}
}

// resubscribe subscribes to wake-ups again after the subscription ended; on
// failure it returns nil and the engine lives on its poll, trying again at
// the next one.
func (e *Engine) resubscribe(ctx context.Context) pubsub.Subscription {
	wake, err := e.ps.Subscribe(ctx, events.WorkTopic)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("resubscribe to wake-ups; polling until it works", "err", err)
		}
		return nil
	}
	return wake
}

// wakeups is the channel of a wake-up subscription; nil (blocking forever)
// when there is none.
func wakeups(s pubsub.Subscription) <-chan pubsub.Message {
	if s == nil {
		return nil
	}
	return s.C()
}

// kickAcquirer asks the acquire loop for another round. Kicks coalesce: one
// that arrives while a round runs makes exactly one more round, so a chat
// that became pending after a round's query is never left for the poll.
func (e *Engine) kickAcquirer() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// acquireLoop is the one goroutine that acquires chats: on each kick it
// takes as many pending chats as there are free slots, in one statement,
// until fewer come back than it asked for. When a round passed pending
// chats over (their rows were locked: requests reading them, another
// replica acquiring them), it tries again after a short pause that grows
// up to the poll interval, rather than leave them to the poll.
func (e *Engine) acquireLoop(ctx, runs context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var pause time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.kick:
		case <-retry.C:
		}
		for {
			filled, passedOver := e.acquire(ctx, runs)
			if ctx.Err() != nil {
				return
			}
			if filled {
				continue
			}
			if passedOver {
				pause = min(max(2*pause, 20*time.Millisecond), e.cfg.PollInterval)
				retry.Reset(pause)
			} else {
				pause = 0
			}
			break
		}
	}
}

// acquire starts runs for up to the free slots' worth of pending chats. It
// reports whether it filled every free slot (there may be more), and
// whether it left free slots while pending chats remain (passed over).
func (e *Engine) acquire(ctx, runs context.Context) (filled, passedOver bool) {
	free := 0
take:
	for free < min(cap(e.slots), store.MaxAcquire) { // more: the loop comes back, as filled says
		select {
		case e.slots <- struct{}{}:
			free++
		default:
			break take
		}
	}
	if free == 0 {
		return false, false // every slot busy; a finishing run kicks the loop
	}
	session, worker := e.current()
	if session != nil {
		runs = session
	} else {
		for range free {
			<-e.slots
		}
		return false, false // not known to live: setAlive kicks the loop once it is
	}
	a := store.Acquire{WorkerID: worker, TTL: e.cfg.LeaseTTL, Max: free}
	if e.cfg.Budget != nil {
		a.MaxRunning = e.cfg.Budget.Defaults.MaxRunning
	}
	chats, leases, err := e.st.AcquireChats(ctx, a)
	if err != nil && ctx.Err() == nil {
		e.unavailable(err)
		e.log.Error("acquire chats", "err", err)
	}
	for range free - len(chats) {
		<-e.slots
	}
	ctls := e.subscribeControls(runs, chats)
	// One announcement for the whole batch: on PostgreSQL each is a
	// transaction of its own.
	e.announce(ctx, func(n *events.Notice) {
		for _, c := range chats {
			n.StatusChanged(chat.Pending, c)
		}
	})
	histories := e.firstHistories(ctx, chats)
	for i, c := range chats {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer func() { <-e.slots; e.kickAcquirer() }()
			e.runChat(runs, c, leases[i], ctls[i], histories[c.ID])
		}()
	}
	if err != nil {
		return false, false
	}
	if len(chats) < free {
		pending, err := e.st.HasPending(ctx)
		return false, err == nil && pending
	}
	return true, false
}

// firstPage bounds the messages of each chat read together with its
// acquisition; a run reads on past a full page by itself.
const firstPage = 100

// firstHistories reads the start of the acquired chats' histories, from
// their newest compaction on (store.Reader.SinceCompaction), in one
// query, for their runs' first step: one round trip for the batch instead
// of one per run. Nothing but a chat's run adds messages to it while it is
// running, so they are still its history when the run starts. On failure
// each run reads its own.
func (e *Engine) firstHistories(ctx context.Context, chats []chat.Chat) map[string][]chat.Message {
	if len(chats) == 0 {
		return nil
	}
	ids := make([]string, len(chats))
	for i, c := range chats {
		ids[i] = c.ID
	}
	all := make(map[string][]chat.Message, len(ids))
	for chunk := range slices.Chunk(ids, store.MaxPageSize) {
		h, err := e.st.SinceCompaction(ctx, chunk, firstPage)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("read the acquired chats' histories; each run reads its own", "chats", len(ids), "err", err)
			}
			return nil
		}
		maps.Copy(all, h)
	}
	return all
}

// subscribeControls subscribes to the control topic of each acquired chat,
// for its run to take over. It is done before the chats are announced
// running: a stream asks for a snapshot the moment it sees that, and a
// request nobody hears leaves its replica without the run's deltas. A nil
// entry (the subscription failed) leaves the run to subscribe by itself.
func (e *Engine) subscribeControls(ctx context.Context, chats []chat.Chat) []pubsub.Subscription {
	ctls := make([]pubsub.Subscription, len(chats))
	for i, c := range chats {
		ctl, err := e.ps.Subscribe(ctx, events.ControlTopic(c.ID))
		if err != nil {
			e.log.Warn("subscribe to control topic before the run; it tries again", "chat", c.ID, "err", err)
			continue
		}
		ctls[i] = ctl
	}
	return ctls
}

// maintain does the periodic work any replica may do for all: recover chats
// whose worker died, and resume chats whose client missed its deadline.
func (e *Engine) maintain(ctx context.Context) {
	ids, err := e.st.RecoverExpiredLeases(ctx, !e.outage())
	if err != nil && ctx.Err() == nil {
		e.unavailable(err)
		e.log.Error("recover expired leases", "err", err)
	}
	e.announceRecovered(ctx, ids, "recovered a chat whose worker stopped renewing its lease")
	e.expireActions(ctx)
}

// announceRecovered tells the chats' streams and the feeds that the
// recovered chats are pending again, and wakes the workers.
func (e *Engine) announceRecovered(ctx context.Context, ids []string, why string) {
	if len(ids) == 0 {
		return
	}
	var n events.Notice
	for _, id := range ids {
		e.log.Warn(why, "chat", id)
		if c, err := e.st.GetChat(ctx, id); err == nil {
			n.StatusChanged(chat.Running, c)
		}
	}
	n.Wake = true
	n.Publish(ctx, e.ps, e.log)
}
