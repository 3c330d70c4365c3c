package chaos

import (
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/testutil/mcptest"
	"github.com/parleyhq/parley/internal/testutil/parleybin"
)

var (
	flagChats  = flag.Int("chaos.chats", 0, "chats of the chaos run (default 100; 1000 with PARLEY_CHAOS_LONG=1)")
	flagFaults = flag.Int("chaos.faults", 0, "faults injected during the chaos run, one of them a PostgreSQL restart (default: 6, or one per 60 chats beyond 360)")
	flagSeed   = flag.Uint64("chaos.seed", 0, "seed of the chaos run's plans and faults (default: random, logged)")
)

// size is how big a chaos run is.
type size struct {
	chats, faults, concurrency int
	limit                      time.Duration // for the workload, and again for the settling
}

// runSize reads the flags and PARLEY_CHAOS_LONG. The short run fits the
// default `go test`; the long one has 1,000 chats.
func runSize() size {
	s := size{chats: 100, concurrency: 12, limit: 4 * time.Minute}
	if os.Getenv("PARLEY_CHAOS_LONG") == "1" {
		s = size{chats: 1000, concurrency: 24, limit: 15 * time.Minute}
	}
	if *flagChats > 0 {
		s.chats = *flagChats
		s.limit = max(s.limit, time.Duration(s.chats)*time.Second)
	}
	s.faults = max(6, s.chats/60)
	if *flagFaults > 0 {
		s.faults = *flagFaults
	}
	s.faults = min(s.faults, s.chats-1)
	return s
}

// TestChaos runs three replicas on one PostgreSQL database and a workload
// of chats calling every kind of tool, while replicas are killed (SIGKILL)
// or stopped (SIGTERM) and started again, and the database is restarted
// once. Then every chat must settle in waiting (after one POST /retry if it
// ended in error, which must say why), every history must keep the
// invariant and hold no duplicate, and no server-side tool may have had its
// effect twice.
func TestChaos(t *testing.T) {
	sz := runSize()
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("chaos: %d chats, %d faults, %d drivers, seed %d (run again with -chaos.seed=%d)", sz.chats, sz.faults, sz.concurrency, seed, seed)
	pgBin := postgresBin(t)
	mcpBin := mcptest.Everything(t)
	began := time.Now()

	dir := keptDir(t, "parley-chaos-")
	// The build runs while PostgreSQL and the MCP server start.
	type built struct {
		bin string
		err error
	}
	building := make(chan built, 1)
	go func() {
		bin, err := parleybin.Path()
		building <- built{bin, err}
	}()
	pg := startPostgres(t, pgBin)
	mcpURL := mcptest.StartEverythingHTTP(t, mcpBin) // one server the three replicas share
	rec := newRecorder(t)
	cfg := writeConfig(t, dir, rec.url, mcpURL)
	b := <-building
	if b.err != nil {
		t.Fatal(b.err)
	}
	c := startCluster(t, b.bin, dir, cfg, pg, 3)
	cl := newClient(c)
	ctx, cancel := context.WithTimeout(context.Background(), sz.limit)
	defer cancel()
	c.waitTools(ctx, cl, "http_fetch", "current_time", "record", "guarded_record", "everything_echo")
	t.Logf("chaos: the cluster is up after %v", time.Since(began).Round(time.Millisecond))

	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &workload{t: t, cl: cl, plans: makePlans(rng, sz.chats, rec.url)}
	faults := makeFaults(rng, sz.faults, 3)
	start := time.Now()
	injected, errs := w.run(ctx, c, sz.concurrency, faults)
	ran := time.Since(start)
	for i, err := range errs {
		if i == 20 {
			t.Errorf("… and %d more driver errors", len(errs)-i)
			break
		}
		t.Errorf("driver: %v", err)
	}

	settleCtx, cancelSettle := context.WithTimeout(context.Background(), sz.limit)
	defer cancelSettle()
	start = time.Now()
	errKinds := w.settleAll(settleCtx, sz.concurrency)
	settled := time.Since(start)
	out := w.check(settleCtx, pg.dsn, rec)
	c.stopAll()
	c.checkLogs()

	byKind := map[string]int{}
	for _, f := range faults[:injected] {
		byKind[f.kind]++
	}
	turns, calls := 0, map[string]int{}
	for _, p := range w.plans {
		turns += len(p.turns)
		for _, tr := range p.turns {
			for _, pc := range tr.calls {
				calls[pc.kind]++
			}
		}
	}
	t.Logf("chaos: %d chats, %d turns, calls %v", len(w.plans), turns, calls)
	t.Logf("chaos: %d faults injected %v; workload %v, settling (retries included) %v, whole test %v",
		injected, byKind, ran.Round(time.Millisecond), settled.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	t.Logf("chaos: chats retried after an error, by kind: %v", errKinds)
	t.Logf("chaos: racing posts: %d pairs, %d with one winner, %d whose winner's answer was lost, %d with two winners",
		w.race.pairs.Load(), w.race.oneWon.Load(), w.race.lostWin.Load(), w.race.twoWon.Load())
	t.Logf("chaos: client requests that met an unreachable replica or a 503: %d; 500 answers: %d", cl.unavailable.Load(), cl.serverErrors.Load())
	for _, k := range kinds {
		var parts []string
		for o, n := range out[k] {
			parts = append(parts, o+": "+strconv.Itoa(n))
		}
		sort.Strings(parts)
		t.Logf("chaos: %s calls ended %s", k, strings.Join(parts, "; "))
	}
}
