package main

import (
	"context"
	"fmt"
	"time"
)

// sqlite runs the SQLite measurements: raw commits, loop steps/s, the idle
// chats' goroutines, the one-replica latency (by default), the full cycles
// on one replica and the history rows.
func (b *bench) sqlite(ctx context.Context) {
	if !b.runs(groupLoop) && !(b.runs(groupStream) && b.o.oneReplica == "sqlite") && !b.runs(groupCycle) && !b.runs(groupHistory) {
		return
	}
	db, err := newSQLite()
	if err != nil {
		b.t.failed("SQLite", err)
		return
	}
	defer func() {
		if err := db.drop(); err != nil {
			b.t.note("SQLite cleanup: %v", err)
		}
	}()
	r, err := db.open(ctx, b.log)
	if err != nil {
		b.t.failed("SQLite", err)
		return
	}
	defer r.close()
	b.dbs = append(b.dbs, fmt.Sprintf("%s (temporary file, WAL, %s)", db.version, r.poolSize()))
	if b.runs(groupLoop) {
		b.loopRows(ctx, "SQLite", r, b.o.chats, true)
	}
	if b.runs(groupStream) && b.o.oneReplica == "sqlite" {
		b.latencyRows(ctx, "1 replica, SQLite", r, r, 5, true)
	}
	if b.runs(groupCycle) {
		b.cycleRows(ctx, "SQLite", "1 replica", r, r, 5*time.Millisecond)
	}
	if b.runs(groupHistory) {
		b.historyRows(ctx, "SQLite", r)
		b.compactionRows(ctx, "SQLite", r)
	}
}

// postgresRows runs the PostgreSQL measurements on a fresh schema: raw
// commits, loop steps/s, the latency across two replicas (plus the
// one-replica latency with -one-replica postgres), the full cycles across
// two replicas, the history rows on one replica, and the fair-acquisition
// rows on a schema of their own.
func (b *bench) postgresRows(ctx context.Context) {
	if b.runs(groupFair) {
		b.fairPostgres(ctx)
	}
	if !b.runs(groupLoop) && !b.runs(groupStream) && !b.runs(groupCycle) && !b.runs(groupHistory) {
		return
	}
	db, err := newPostgres(ctx, b.o.postgres)
	if err != nil {
		b.t.failed("PostgreSQL", err)
		return
	}
	defer func() {
		if err := db.drop(); err != nil {
			b.t.note("PostgreSQL cleanup: %v", err)
		}
	}()
	a, err := db.open(ctx, b.log)
	if err != nil {
		b.t.failed("PostgreSQL", err)
		return
	}
	defer a.close()
	b.dbs = append(b.dbs, fmt.Sprintf("%s (schema %s, %s per replica)", db.version, db.channel, a.poolSize()))
	if b.runs(groupLoop) {
		b.loopRows(ctx, "PostgreSQL", a, b.o.pgChats, false)
	}
	if b.runs(groupStream) && b.o.oneReplica == "postgres" {
		b.latencyRows(ctx, "1 replica, PostgreSQL", a, a, 5, true)
	}
	if b.runs(groupStream) || b.runs(groupCycle) {
		b.twoReplicaRows(ctx, db, a)
	}
	if b.runs(groupHistory) {
		b.historyRows(ctx, "PostgreSQL", a)
	}
}

// twoReplicaRows opens a second replica B beside a and measures the
// latency and the full cycles across the two; B is closed after.
func (b *bench) twoReplicaRows(ctx context.Context, db *database, a *replica) {
	r2, err := db.open(ctx, b.log)
	if err != nil {
		b.t.failed("PostgreSQL second replica", err)
		return
	}
	defer r2.close()
	if b.runs(groupStream) {
		b.latencyRows(ctx, "2 replicas, PostgreSQL", a, r2, 50, false)
	}
	if b.runs(groupCycle) {
		b.cycleRows(ctx, "PostgreSQL", "2 replicas, POST on B, engine on A", a, r2, 10*time.Millisecond)
	}
}

// loopRows measures the raw commit rate and the loop's steps/s on one
// database; with idle, also what the idle chats hold afterwards. The raw
// rate is measured half before and half after the loop, and the two are
// averaged, so a machine that slows down or speeds up during the run moves
// the floor and the loop alike.
func (b *bench) loopRows(ctx context.Context, name string, r *replica, chats int, idle bool) {
	o := b.o
	rawMetric := fmt.Sprintf("%s raw single-row commits/s (%d goroutines, %s)", name, o.concurrency, r.poolSize())
	rawHalf := func(when string) (float64, bool) {
		b.step("%s: raw single-row commits %s the loop, %d goroutines, %s", name, when, o.concurrency, o.rawDuration/2)
		raw, err := r.rawCommits(ctx, o.concurrency, o.rawDuration/2)
		if err != nil {
			b.t.failed(rawMetric, err)
			return 0, false
		}
		return raw, true
	}
	before, ok := rawHalf("before")
	if !ok {
		return
	}

	b.step("%s: loop, %d chats × %s", name, chats, plural(o.steps, "step"))
	res, err := measureLoop(ctx, r, chats, o.steps, o.concurrency, b.log)
	stepsMetric := fmt.Sprintf("%s loop steps/s (%s chats × %s, concurrency %d)", name, thousands(int64(chats)), plural(o.steps, "step"), o.concurrency)
	if err != nil {
		b.t.failed(stepsMetric, err)
		return
	}
	after, ok := rawHalf("after")
	if !ok {
		return
	}
	raw := (before + after) / 2
	b.t.add(row{metric: rawMetric, value: fmt.Sprintf("%s (%s before the loop, %s after)", perSec(raw), perSec(before), perSec(after)), target: "reference"})
	sps := res.stepsPerSec()
	b.t.add(row{metric: stepsMetric, value: perSec(sps),
		target: "≥ 1/3 of raw = " + perSec(raw/3),
		ratio:  fmt.Sprintf("%.2f of raw", sps/raw),
		pass:   verdict(sps >= raw/3)})
	if !idle {
		return
	}
	per := float64(res.goroutines) / float64(chats)
	b.t.add(row{metric: fmt.Sprintf("goroutines held by %s idle chats (%s, after their runs)", thousands(int64(chats)), name),
		value:  fmt.Sprintf("%d (%.4f per chat)", res.goroutines, per),
		target: "0 per chat",
		pass:   verdict(per < 0.01)})
	b.t.add(row{metric: fmt.Sprintf("heap held per idle chat (%s)", name),
		value: bytesIEC(float64(res.heap) / float64(chats))})
}

// latencyRows measures the delta → SSE client latency with the engine on
// eng and the clients on srv; p99 must stay under limitMS. With heap, it
// also reports the heap and goroutines per running chat.
func (b *bench) latencyRows(ctx context.Context, name string, eng, srv *replica, limitMS float64, heap bool) {
	o := b.o
	b.step("latency, %s: %d streams × %d deltas, one per %s per chat", name, o.streams, o.deltas, o.interval)
	res, err := measureLatency(ctx, eng, srv, latencyOptions{chats: o.streams, deltas: o.deltas, interval: o.interval, heap: heap}, b.log)
	metric := fmt.Sprintf("delta → SSE client, %s, %s streams", name, thousands(int64(o.streams)))
	if err != nil {
		b.t.failed(metric, err)
		return
	}
	p50, p99 := res.percentile(0.50), res.percentile(0.99)
	b.t.add(row{metric: metric + ": p50", value: ms(p50)})
	p99Row := limitRow(metric+": p99", ms(p99), p99, time.Duration(limitMS*float64(time.Millisecond)), fmt.Sprintf("< %g ms", limitMS))
	if len(res.latencies) == 0 {
		p99Row.pass = miss
	}
	b.t.add(p99Row)
	b.t.add(row{metric: metric + ": max", value: ms(res.percentile(1))})
	got := int64(len(res.latencies))
	b.t.add(row{metric: metric + ": deltas received", value: thousands(got) + " of " + thousands(res.sent),
		target: "all", pass: verdict(got == res.sent && res.sent == int64(o.streams*o.deltas))})
	if res.resyncs > 0 || res.failed > 0 {
		b.t.note("%s: %d clients were told to resync, %d failed (first error: %v)", name, res.resyncs, res.failed, res.firstErr)
	}
	if heap {
		b.t.add(row{metric: fmt.Sprintf("heap per active chat (%s: running, %s streamed)", name, plural(o.deltas, "delta")),
			value: bytesIEC(res.heapPerChat)})
		b.t.add(row{metric: fmt.Sprintf("goroutines per active chat (%s)", name),
			value: fmt.Sprintf("%.2f", res.goroutinesPerChat)})
	}
}

// plural formats a count of things: "1 step", "3 steps".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// fairPostgres runs the fair-acquisition rows on a fresh schema of their
// own, so that their queue meets no other row's chats.
func (b *bench) fairPostgres(ctx context.Context) {
	db, err := newPostgres(ctx, b.o.postgres)
	if err != nil {
		b.t.failed("PostgreSQL (fair acquisition)", err)
		return
	}
	defer func() {
		if err := db.drop(); err != nil {
			b.t.note("PostgreSQL cleanup: %v", err)
		}
	}()
	r, err := db.open(ctx, b.log)
	if err != nil {
		b.t.failed("PostgreSQL (fair acquisition)", err)
		return
	}
	defer r.close()
	b.dbs = append(b.dbs, fmt.Sprintf("%s (schema %s, %s; fair acquisition)", db.version, db.channel, r.poolSize()))
	b.fairRows(ctx, r)
}
