package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/service"
)

// latencyOptions sizes one latency measurement.
type latencyOptions struct {
	chats    int           // chats streaming at once, one SSE client each
	deltas   int           // deltas per chat
	interval time.Duration // between two deltas of one chat
	heap     bool          // also measure the heap and goroutines per running chat
}

// latencyResult is what one latency measurement found.
type latencyResult struct {
	latencies latencies
	sent      int64
	resyncs   int
	failed    int   // clients that ended on an error
	firstErr  error // the first of those errors
	// Per running chat, over the same chats idle with their clients
	// connected (heap only).
	heapPerChat       float64
	goroutinesPerChat float64
}

func (r latencyResult) percentile(p float64) time.Duration { return r.latencies.percentile(p) }

// latencies are durations in ascending order.
type latencies []time.Duration

// percentile returns the smallest duration that p of them do not exceed.
func (l latencies) percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(l)))) - 1
	return l[max(0, i)]
}

// parallelism bounds the bench's own concurrent setup requests (creating
// chats, posting messages, opening streams).
const parallelism = 32

// measureLatency measures how long a provider's delta takes to reach an SSE
// client. The engine runs on eng; the API that the clients connect to, and
// the service that creates the chats and posts their messages, run on srv
// (the same replica, or another one on the same database). o.chats chats
// are created idle, each gets one SSE client on its own loopback
// connection, then each gets a message: the engine runs them all, and once
// all have started, each streams o.deltas timestamped deltas o.interval
// apart and holds mid-step until every client has every delta (with
// o.heap, the heap and the goroutines are then compared with the same chats
// idle); then the runs end.
func measureLatency(ctx context.Context, eng, srv *replica, o latencyOptions, log *slog.Logger) (latencyResult, error) {
	var res latencyResult
	cfg := benchConfig()
	url, stopAPI, err := serveAPI(srv, cfg, log)
	if err != nil {
		return res, err
	}
	defer stopAPI()
	token, _, err := auth.Issue(ctx, srv.st, owner, "bench")
	if err != nil {
		return res, err
	}
	svc := service.New(srv.st, srv.ps, cfg, log)
	ids := make([]string, o.chats)
	err = parallel(ctx, o.chats, func(i int) error {
		c, err := svc.CreateChat(ctx, owner, service.NewChat{Title: "bench"})
		ids[i] = c.ID
		return err
	})
	if err != nil {
		return res, fmt.Errorf("create chats: %w", err)
	}

	base := time.Now()
	model := newStreamer(base, o.chats, o.deltas, o.interval)
	defer model.letGo()
	stopEngine := runEngine(engine.New(engine.Config{Concurrency: o.chats}, eng.st, eng.ps, models{model}, nil, log))
	defer stopEngine()

	// One client per chat, each on its own connection.
	cctx, cancelClients := context.WithCancel(ctx)
	defer cancelClients()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.chats, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	received := &atomic.Int64{}
	clients := make([]*streamClient, o.chats)
	var wg sync.WaitGroup
	err = parallel(ctx, o.chats, func(i int) error {
		c := newStreamClient(url+"/api/v1/chats/"+ids[i]+"/stream", token, base, o.deltas, received)
		clients[i] = c
		wg.Go(func() { c.run(cctx, hc) })
		<-c.ready
		return c.openErr
	})
	if err != nil {
		return res, fmt.Errorf("open streams: %w", err)
	}

	var g0 int
	var h0 int64
	if o.heap {
		g0, h0 = settle(0, 0)
	}
	msg, _ := json.Marshal("go")
	err = parallel(ctx, o.chats, func(i int) error {
		_, err := svc.PostMessage(ctx, owner, ids[i], msg, chat.BusyQueue)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("post messages: %w", err)
	}
	if err := wait(ctx, model.startAll, time.Minute); err != nil {
		return res, fmt.Errorf("only %d of %d chats started streaming: %w", model.started.Load(), o.chats, err)
	}
	streaming := time.Duration(o.deltas+1)*o.interval + time.Minute
	if err := wait(ctx, model.allHolding, streaming); err != nil {
		return res, fmt.Errorf("only %d of %d chats streamed every delta: %w", model.holding.Load(), o.chats, err)
	}
	// The last deltas may still be on their way to their clients.
	_ = waitFor(ctx, 5*time.Second, func() bool { return received.Load() >= model.sent.Load() })
	if o.heap {
		g1, h1 := settle(0, 0)
		res.heapPerChat = float64(h1-h0) / float64(o.chats)
		res.goroutinesPerChat = float64(g1-g0) / float64(o.chats)
	}
	model.letGo()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if err := wait(ctx, done, time.Minute); err != nil {
		cancelClients()
		<-done
	}

	res.sent = model.sent.Load()
	for _, c := range clients {
		res.latencies = append(res.latencies, c.latencies...)
		switch {
		case c.resynced:
			res.resyncs++
		case c.err != nil:
			res.failed++
			res.firstErr = cmp.Or(res.firstErr, c.err)
		}
	}
	slices.Sort(res.latencies)
	return res, nil
}

// benchConfig is the configuration of the bench's API and service: the
// defaults, with the bench's model.
func benchConfig() *config.Config {
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: modelName, Provider: "echo", Model: modelName}}
	cfg.DefaultModel = modelName
	return &cfg
}

// serveAPI serves the replica's API on a loopback port until stop.
func serveAPI(r *replica, cfg *config.Config, log *slog.Logger) (url string, stop func(), err error) {
	h, err := api.New(api.Deps{Config: cfg, Store: r.st, PubSub: r.ps, Logger: log})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go s.Serve(ln)
	return "http://" + ln.Addr().String(), func() { s.Close() }, nil
}

// parallel runs fn(0..n-1) on up to parallelism goroutines and returns the
// first error.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	next := make(chan int)
	for range min(n, parallelism) {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = cmp.Or(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return cmp.Or(errs, ctx.Err())
}

// wait waits for ch to close, ctx to end or d to pass.
func wait(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errors.New("timed out after " + d.String())
	}
}
