package main

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/engine"
)

// dispatchSleep is how long each tool of the dispatch step takes.
const dispatchSleep = 5 * time.Millisecond

// cycleRows measures full cycles with the engine on eng and the API on srv:
// the resume latency (p99 under limit) over sequential cycles, and the
// cycles/s of one client and of -cycle-clients clients.
func (b *bench) cycleRows(ctx context.Context, db, replicas string, eng, srv *replica, limit time.Duration) {
	o := b.o
	b.step("cycles, %s, %s: %d sequential, then %d clients for %s", db, replicas, o.resumeSamples, o.cycleClients, o.cycleDuration)
	res, err := measureCycles(ctx, eng, srv, cycleOptions{samples: o.resumeSamples, clients: o.cycleClients, duration: o.cycleDuration}, b.log)
	metric := fmt.Sprintf("resume: POST /tool-results → next model request, %s, %s (%d sequential cycles)", db, replicas, o.resumeSamples)
	if err != nil {
		b.t.failed(metric, err)
		return
	}
	p99 := res.resume.percentile(0.99)
	b.t.add(row{metric: metric + ": p50", value: ms(res.resume.percentile(0.50))})
	b.t.add(limitRow(metric+": p99", ms(p99), p99, limit, fmt.Sprintf("< %g ms", float64(limit)/float64(time.Millisecond))))
	b.t.add(row{metric: metric + ": max", value: ms(res.resume.percentile(1))})
	cycle := fmt.Sprintf("full cycles/s through the HTTP API, %s, %s", db, replicas)
	b.t.add(row{metric: cycle + ", 1 client", value: perSec(cyclesPerSec(res.seqCycles, res.seqElapsed))})
	b.t.add(row{metric: fmt.Sprintf("%s, %d clients", cycle, o.cycleClients), value: perSec(cyclesPerSec(res.concCycles, res.concElapsed))})
	b.t.note("%s, %s, %d clients at once: %s cycles in %s, resume p50 %s, p99 %s.", db, replicas, o.cycleClients,
		thousands(int64(res.concCycles)), res.concElapsed.Round(time.Millisecond), ms(res.concResume.percentile(0.5)), ms(res.concResume.percentile(0.99)))
	poll := engine.DefaultConfig().PollInterval
	if n := slowSamples(res.resume) + slowSamples(res.concResume); n > 0 {
		b.t.note("%s, %s: %s took over %s: the engine's poll (every %s) found the chat, not the wake-up.",
			db, replicas, plural(n, "resume sample"), pollSuspect, poll)
	}
	if res.slowStarts > 0 {
		b.t.note("%s, %s: %s took over %s to reach requires_action: the engine's poll (every %s) found the chat, not the wake-up.",
			db, replicas, plural(res.slowStarts, "new chat"), pollSuspect, poll)
	}
	if res.resyncs > 0 {
		b.t.note("%s, %s: the feed asked for %d resyncs during the cycles", db, replicas, res.resyncs)
	}
}

// slowSamples counts the latencies of at least pollSuspect.
func slowSamples(l latencies) int {
	n := 0
	for _, d := range l {
		if d >= pollSuspect {
			n++
		}
	}
	return n
}

// dispatchRows measures the dispatcher's overhead on a step of 100 calls.
func (b *bench) dispatchRows(ctx context.Context) {
	n := b.o.dispatchSteps
	b.step("dispatch: %d steps of %d calls, each tool %s", n, dispatchCalls, dispatchSleep)
	over, err := measureDispatch(ctx, n, dispatchSleep, b.log)
	metric := fmt.Sprintf("dispatch overhead beyond the slowest tool, %d calls (2 sources × 45, 10 single Tools × 1, each %s)", dispatchCalls, dispatchSleep)
	if err != nil {
		b.t.failed(metric, err)
		return
	}
	med := over.percentile(0.5)
	b.t.add(limitRow(fmt.Sprintf("%s: median of %d steps", metric, n), ms(med), med, 2*time.Millisecond, "< 2 ms"))
	b.t.add(row{metric: metric + ": p99", value: ms(over.percentile(0.99))})
}

// luaRows measures the Lua source.
func (b *bench) luaRows(ctx context.Context) {
	o := b.o
	b.step("lua: %d rounds of a batch of %s sleeps and of a Lua-and-Go step; %d batches of %d instant calls",
		o.luaRounds, thousands(luaSleepCalls), o.dispatchSteps, luaDispatchCalls)
	res, err := measureLua(ctx, o.luaRounds, o.dispatchSteps, b.log)
	if err != nil {
		b.t.failed("Lua source", err)
		return
	}
	med := res.sleepBatches.percentile(0.5)
	b.t.add(limitRow(fmt.Sprintf("Lua: one batch of %s calls that each sleep(%g), median of %d", thousands(luaSleepCalls), luaSleep.Seconds(), o.luaRounds),
		ms(med), med, 150*time.Millisecond, "< 150 ms"))
	batch := res.echoBatches.percentile(0.5)
	per := batch / luaDispatchCalls
	b.t.add(limitRow(fmt.Sprintf("Lua: dispatch per call, batches of %d calls that return at once, median of %d", luaDispatchCalls, o.dispatchSteps),
		fmt.Sprintf("%s/call (%s/batch)", µs(per), ms(batch)), per, 30*time.Microsecond, "< 30 µs/call"))
	step := res.steps.percentile(0.5)
	b.t.add(limitRow(fmt.Sprintf("Lua: a step with a Lua and a Go source taking %s each, median of %d", luaStepSleep, o.luaRounds),
		ms(step), step, 150*time.Millisecond, "< 150 ms (the max, not the sum)"))
}
