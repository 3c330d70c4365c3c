package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/engine"
)

// cycleOptions sizes one cycle measurement.
type cycleOptions struct {
	samples  int           // cycles of the sequential run, each one resume sample
	clients  int           // clients of the concurrent run
	duration time.Duration // how long the concurrent run starts new cycles
}

// cycleWarmup is the cycles run, not counted, before the sequential run.
const cycleWarmup = 10

// cycleTimeout bounds one cycle.
const cycleTimeout = 30 * time.Second

// cycleResult is what one cycle measurement found.
type cycleResult struct {
	resume     latencies // sequential run: POST /tool-results → the model's next request
	seqCycles  int
	seqElapsed time.Duration

	concResume  latencies // the same, in the concurrent run
	concCycles  int
	concElapsed time.Duration

	slowStarts int   // cycles whose chat took over pollSuspect from creation to requires_action
	resyncs    int64 // feed resyncs (each waiter then re-read its chat)
}

// pollSuspect is longer than any step of a cycle takes when the engine is
// woken: a chat that waits this long was found by the engine's poll.
const pollSuspect = 500 * time.Millisecond

func cyclesPerSec(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// measureCycles runs full cycles through the HTTP API with the Go client:
// create a chat with a first message and the dynamic tool client_op → the
// model calls it → requires_action, seen on the owner's feed → the client
// submits the result → the model answers → waiting, seen on the feed.
//
// Only eng runs an engine, so every step, the resumed one included, runs
// there; the API, its service and the feed are srv's. With two replicas the
// wake-up of a submission therefore always crosses from srv to eng.
//
// First o.samples cycles run one after the other (after a warm-up): each
// gives one resume latency, from the moment the client sends POST
// /tool-results to the moment the model receives the chat's next request,
// and together the cycles/s of one client. Then o.clients clients run
// cycles at once for o.duration: the cycles/s of that many clients.
func measureCycles(ctx context.Context, eng, srv *replica, o cycleOptions, log *slog.Logger) (cycleResult, error) {
	var res cycleResult
	cfg := benchConfig()
	url, stopAPI, err := serveAPI(srv, cfg, log)
	if err != nil {
		return res, err
	}
	defer stopAPI()
	token, _, err := auth.Issue(ctx, srv.st, owner, "bench-cycles")
	if err != nil {
		return res, err
	}

	arr := newArrivals()
	ws := newWatchStore(eng.st, math.MaxInt64)
	stopEngine := runEngine(engine.New(engine.Config{}, ws, eng.ps, models{caller{arr}}, nil, log))
	defer stopEngine()
	// The engine's first AcquireChats comes after it subscribed to wake-ups.
	if err := waitFor(ctx, 10*time.Second, func() bool { return ws.acquires.Load() > 0 }); err != nil {
		return res, fmt.Errorf("engine did not start: %w", err)
	}

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * o.clients, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	c := client.New(url, token, client.WithHTTPClient(hc))
	f, err := openFeed(ctx, c)
	if err != nil {
		return res, err
	}
	defer f.close()
	cy := &cycler{c: c, feed: f, arr: arr}

	for range cycleWarmup {
		if _, _, err := cy.cycle(ctx); err != nil {
			return res, fmt.Errorf("warm-up cycle: %w", err)
		}
	}
	start := time.Now()
	for range o.samples {
		d, started, err := cy.cycle(ctx)
		if err != nil {
			return res, err
		}
		res.resume = append(res.resume, d)
		if started >= pollSuspect {
			res.slowStarts++
		}
	}
	res.seqElapsed, res.seqCycles = time.Since(start), o.samples
	slices.Sort(res.resume)

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start = time.Now()
	end := start.Add(o.duration)
	for range o.clients {
		wg.Go(func() {
			var (
				mine latencies
				slow int
			)
			for time.Now().Before(end) && cctx.Err() == nil {
				d, started, err := cy.cycle(cctx)
				if err != nil {
					mu.Lock()
					if firstErr == nil && !errors.Is(err, context.Canceled) {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				mine = append(mine, d)
				if started >= pollSuspect {
					slow++
				}
			}
			mu.Lock()
			res.concResume = append(res.concResume, mine...)
			res.slowStarts += slow
			mu.Unlock()
		})
	}
	wg.Wait()
	res.concElapsed = time.Since(start)
	if firstErr != nil {
		return res, firstErr
	}
	res.concCycles = len(res.concResume)
	slices.Sort(res.concResume)
	res.resyncs = f.resyncs.Load()
	return res, nil
}

// cycler runs cycles as one program of the owner would: one Go client, one
// feed.
type cycler struct {
	c    *client.Client
	feed *feed
	arr  *arrivals
}

// cycle runs one full cycle on a new chat and returns its resume latency,
// and how long the chat took from its creation to requires_action.
func (cy *cycler) cycle(ctx context.Context) (resume, started time.Duration, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, cycleTimeout, fmt.Errorf("cycle took over %s", cycleTimeout))
	defer cancel()
	created := time.Now()
	ch, err := cy.c.CreateChat(ctx, client.CreateChatRequest{
		Title:   "bench", // so the engine does not ask the model for one
		Message: "go",
		DynamicTools: []client.DynamicTool{{Name: clientTool.Name, Description: clientTool.Description,
			InputSchema: clientTool.InputSchema}},
	})
	if err != nil {
		return 0, 0, fmt.Errorf("create chat: %w", err)
	}
	defer cy.feed.forget(ch.ID)
	ev, err := cy.feed.await(ctx, ch.ID,
		func(ev client.FeedEvent) bool { return ev.Kind == client.FeedActionRequired },
		func(c client.Chat) bool { return c.Status == client.StatusRequiresAction })
	if err != nil {
		return 0, 0, fmt.Errorf("wait for requires_action: %w", err)
	}
	if len(ev.ToolCalls) != 1 {
		return 0, 0, fmt.Errorf("chat %s requires %d results, want 1", ch.ID, len(ev.ToolCalls))
	}
	started = time.Since(created)
	key, _ := json.Marshal(ch.ID)
	arrived := cy.arr.expect(ch.ID)
	defer cy.arr.forget(ch.ID)
	sent := time.Now()
	if _, err := cy.c.SubmitToolResults(ctx, ch.ID, []client.ToolResult{{ToolCallID: ev.ToolCalls[0].ToolCallID, Output: key}}); err != nil {
		return 0, 0, fmt.Errorf("submit tool results: %w", err)
	}
	var resumed time.Time
	select {
	case resumed = <-arrived:
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("chat %s: the model got no request after the results: %w", ch.ID, context.Cause(ctx))
	}
	_, err = cy.feed.await(ctx, ch.ID,
		func(ev client.FeedEvent) bool {
			return ev.Kind == client.FeedStatusChange && ev.Chat.Status == client.StatusWaiting
		},
		func(c client.Chat) bool { return c.Status == client.StatusWaiting })
	if err != nil {
		return 0, 0, fmt.Errorf("wait for the answer: %w", err)
	}
	return resumed.Sub(sent), started, nil
}
