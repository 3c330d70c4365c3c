// Command parley-bench measures parley's engine, database, live streaming,
// client-executed tools and tool dispatch in one process and prints one
// table per run, each figure beside its floor or target
// (docs/benchmarks.md says what each row measures).
//
// It starts the real components — store, pubsub, engine, HTTP API on
// loopback listeners, the Go client, the tool dispatcher, the Lua source,
// the MCP source — with in-process models that answer without network; the
// facade rows' model is a fake OpenAI server on loopback (fakemodel.go),
// which parley's openai provider and the official Go client both call.
// The MCP rows' servers are this binary, started again with
// PARLEY_BENCH_MCP_SERVER=1, which makes it an MCP server on stdio.
// SQLite always runs, in a temporary directory; PostgreSQL runs when a DSN
// is given (-postgres, or PARLEY_BENCH_POSTGRES, or PARLEY_TEST_POSTGRES),
// in a fresh schema dropped at the end.
//
// A missed target is reported (MISS), not an error: the exit status is 0
// unless a measurement could not be made.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	if os.Getenv(mcpServerEnv) == "1" {
		os.Exit(serveMCP())
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// options are the command's flags.
type options struct {
	postgres    string
	concurrency int
	chats       int
	pgChats     int
	steps       int
	rawDuration time.Duration
	streams     int
	deltas      int
	interval    time.Duration
	oneReplica  string
	verbose     bool
	cpuProfile  string

	resumeSamples   int
	cycleClients    int
	cycleDuration   time.Duration
	dispatchSteps   int
	luaRounds       int
	mcpRounds       int
	mcpCalls        int
	facadeRequests  int
	fairRounds      int
	fairChats       int
	compactionTurns int
	skip            map[string]bool // groups not to run

	historySizes []int // prior messages of the history rows' chats
	historyChats int
	historySteps int
	historyPosts int
}

// Groups of rows that -skip can leave out.
const (
	groupLoop     = "loop"     // raw commits, loop steps/s, idle chats
	groupStream   = "stream"   // delta → SSE client latency
	groupCycle    = "cycle"    // resume latency and full cycles/s
	groupDispatch = "dispatch" // dispatcher overhead
	groupLua      = "lua"      // the Lua source
	groupMCP      = "mcp"      // an MCP source over stdio
	groupHistory  = "history"  // step and POST /tool-results cost by history length; a long chat on a small window
	groupFacade   = "facade"   // the OpenAI-compatible facade over direct model calls
	groupFair     = "fair"     // fair acquisition across owners (PostgreSQL)
)

var groups = []string{groupLoop, groupStream, groupCycle, groupDispatch, groupLua, groupMCP, groupHistory, groupFacade, groupFair}

// parseSkip reads -skip: a comma-separated list of groups.
func parseSkip(list string) (map[string]bool, error) {
	skip := map[string]bool{}
	for g := range strings.SplitSeq(list, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		if !slices.Contains(groups, g) {
			return nil, fmt.Errorf("-skip: unknown group %q (groups: %s)", g, strings.Join(groups, ", "))
		}
		skip[g] = true
	}
	return skip, nil
}

func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("parley-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: parley-bench [flags]\n\nMeasures parley in one process and prints one table (docs/benchmarks.md).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	dsn := getenv("PARLEY_BENCH_POSTGRES")
	if dsn == "" {
		dsn = getenv("PARLEY_TEST_POSTGRES")
	}
	fs.StringVar(&o.postgres, "postgres", dsn, "PostgreSQL `DSN` (default $PARLEY_BENCH_POSTGRES, else $PARLEY_TEST_POSTGRES); empty skips the PostgreSQL rows")
	fs.IntVar(&o.concurrency, "concurrency", 64, "engine concurrency of the loop runs, and goroutines of the raw commit loop")
	fs.IntVar(&o.chats, "chats", 20000, "chats of the SQLite loop run; they are also the idle chats whose goroutines are counted")
	fs.IntVar(&o.pgChats, "pg-chats", 20000, "chats of the PostgreSQL loop run")
	fs.IntVar(&o.steps, "steps", 1, "model calls per chat run: steps-1 calls of a server-side tool, then a text")
	fs.DurationVar(&o.rawDuration, "raw-duration", 3*time.Second, "how long the raw commit rate is measured, per database: half before the loop, half after")
	fs.IntVar(&o.streams, "streams", 1000, "chats streaming at once in the latency runs, one SSE client each")
	fs.IntVar(&o.deltas, "deltas", 20, "deltas each streaming chat sends")
	fs.DurationVar(&o.interval, "delta-interval", 250*time.Millisecond, "time between two deltas of one chat")
	fs.StringVar(&o.oneReplica, "one-replica", "sqlite", "database of the one-replica latency run: sqlite or postgres")
	fs.BoolVar(&o.verbose, "v", false, "print the components' warnings and errors on stderr")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `file` (go tool pprof)")
	fs.IntVar(&o.resumeSamples, "resume-samples", 300, "sequential full cycles per database, each one resume-latency sample")
	fs.IntVar(&o.cycleClients, "cycle-clients", 16, "concurrent clients of the second full-cycle run")
	fs.DurationVar(&o.cycleDuration, "cycle-duration", 3*time.Second, "how long the concurrent clients start new cycles")
	fs.IntVar(&o.dispatchSteps, "dispatch-steps", 200, "dispatcher steps of 100 calls timed, and Lua batches of 100 instant calls")
	fs.IntVar(&o.luaRounds, "lua-rounds", 5, "Lua batches of 1,000 sleeps, and Lua-and-Go steps, timed")
	fs.IntVar(&o.mcpRounds, "mcp-rounds", 20, "MCP steps of 100 calls that each wait 50ms, timed")
	fs.IntVar(&o.mcpCalls, "mcp-calls", 2000, "MCP echo calls timed through parley, and as many through the SDK alone")
	sizes := fs.String("history-sizes", "10,1000,10000", "comma-separated prior message `counts` of the history rows' chats; the last is compared with the first")
	fs.IntVar(&o.historyChats, "history-chats", 5, "chats per history size")
	fs.IntVar(&o.historySteps, "history-steps", 21, "model calls per history run: steps-1 calls of a server-side tool, then a text")
	fs.IntVar(&o.historyPosts, "history-posts", 20, "POST /tool-results timed per history chat, after one for warm-up")
	fs.IntVar(&o.facadeRequests, "facade-requests", 1000, "rounds of the facade rows: each makes every kind of request once through the facade and once directly")
	fs.IntVar(&o.fairChats, "fair-chats", 10000, "pending chats of the fair-acquisition rows (PostgreSQL): 990 of 99 light owners, the rest of one heavy owner")
	fs.IntVar(&o.compactionTurns, "compaction-turns", 200, "turns of the long chat on a 3,000-token window")
	fs.IntVar(&o.fairRounds, "fair-rounds", 200, "acquisitions of the fair-acquisition rows timed each way (PostgreSQL)")
	skip := fs.String("skip", "", "comma-separated `groups` not to run: "+strings.Join(groups, ", "))
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.skip, err = parseSkip(*skip); err != nil {
		return o, err
	}
	if o.historySizes, err = parseSizes(*sizes); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case o.concurrency < 1 || o.chats < 1 || o.pgChats < 1 || o.steps < 1 || o.streams < 1 || o.deltas < 1:
		return o, fmt.Errorf("-concurrency, -chats, -pg-chats, -steps, -streams and -deltas must be at least 1")
	case o.fairRounds < 1 || o.compactionTurns < 1:
		return o, fmt.Errorf("-fair-rounds and -compaction-turns must be at least 1")
	case o.fairChats < (fairOwners-1)*fairLight+fairOwners:
		return o, fmt.Errorf("-fair-chats must be at least %d (the light owners' and one per owner)", (fairOwners-1)*fairLight+fairOwners)
	case o.resumeSamples < 1 || o.cycleClients < 1 || o.dispatchSteps < 1 || o.luaRounds < 1 || o.mcpRounds < 1 || o.mcpCalls < 1 || o.facadeRequests < 1:
		return o, fmt.Errorf("-resume-samples, -cycle-clients, -dispatch-steps, -lua-rounds, -mcp-rounds, -mcp-calls and -facade-requests must be at least 1")
	case o.historyChats < 1 || o.historySteps < 2 || o.historyPosts < 1:
		return o, fmt.Errorf("-history-chats and -history-posts must be at least 1, -history-steps at least 2")
	case o.rawDuration <= 0 || o.interval <= 0 || o.cycleDuration <= 0:
		return o, fmt.Errorf("-raw-duration, -delta-interval and -cycle-duration must be positive")
	case o.oneReplica != "sqlite" && o.oneReplica != "postgres":
		return o, fmt.Errorf("-one-replica must be sqlite or postgres, not %q", o.oneReplica)
	case o.oneReplica == "postgres" && o.postgres == "" && !o.skip[groupStream]:
		return o, fmt.Errorf("-one-replica postgres needs a PostgreSQL DSN")
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	o, err := parseFlags(args, stderr, getenv)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "parley-bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "parley-bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "parley-bench:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	logs := newLogCounter(stderr, o.verbose)
	b := &bench{o: o, log: slog.New(logs), t: &table{}, progress: stderr}
	b.quiet = idleBefore(500 * time.Millisecond)
	start := time.Now()
	if b.runs(groupDispatch) {
		b.dispatchRows(ctx)
	}
	if b.runs(groupLua) {
		b.luaRows(ctx)
	}
	if b.runs(groupMCP) {
		b.mcpRows(ctx)
	}
	if b.runs(groupFacade) {
		b.facadeRows(ctx)
	}
	b.sqlite(ctx)
	if o.postgres != "" {
		b.postgresRows(ctx)
	} else if b.runs(groupLoop) || b.runs(groupStream) || b.runs(groupCycle) || b.runs(groupHistory) || b.runs(groupFair) {
		b.t.note("PostgreSQL rows skipped: no DSN (set -postgres, PARLEY_BENCH_POSTGRES or PARLEY_TEST_POSTGRES).")
	}
	if w, e := logs.counts(); w+e > 0 {
		b.t.note("the components logged %d warnings and %d errors (-v prints them).", w, e)
	}
	b.t.note("total run time %s.", time.Since(start).Round(time.Second))

	b.header(stdout)
	b.t.print(stdout)
	if b.t.hasErrors() {
		return 1
	}
	return 0
}

// bench runs the measurements and fills the table.
type bench struct {
	o        options
	log      *slog.Logger
	t        *table
	progress io.Writer
	dbs      []string // databases used, for the header
	quiet    string   // how idle the machine was before the run
}

// runs reports whether the group's rows are measured.
func (b *bench) runs(group string) bool { return !b.o.skip[group] }

// step tells stderr what runs now: a full run takes a while.
func (b *bench) step(format string, args ...any) {
	fmt.Fprintf(b.progress, "parley-bench: "+format+"\n", args...)
}

// header prints the machine and the run's settings.
func (b *bench) header(w io.Writer) {
	fmt.Fprintf(w, "parley-bench %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d)%s, %s/%s, %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), cpuModel(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if b.quiet != "" {
		fmt.Fprintf(w, "load: %s\n", b.quiet)
	}
	if len(b.dbs) > 0 {
		fmt.Fprintf(w, "databases: %s\n", strings.Join(b.dbs, "; "))
	}
	o := b.o
	fmt.Fprintf(w, "loop: engine concurrency %d, %s per run, instant in-process model; raw commits: %d goroutines for %s\n",
		o.concurrency, plural(o.steps, "step"), o.concurrency, o.rawDuration)
	fmt.Fprintf(w, "streams: %d chats at once, %d deltas each, one per %s per chat (%s deltas/s in all)\n",
		o.streams, o.deltas, o.interval, thousands(int64(float64(o.streams)/o.interval.Seconds())))
	fmt.Fprintf(w, "cycles: %d sequential per database (after %d for warm-up), then %d clients for %s; engine defaults, in-process model\n",
		o.resumeSamples, cycleWarmup, o.cycleClients, o.cycleDuration)
	fmt.Fprintf(w, "tools: %d dispatcher steps (after %d for warm-up); Lua: %d rounds, %d batches of instant calls\n",
		o.dispatchSteps, dispatchWarmup, o.luaRounds, o.dispatchSteps)
	fmt.Fprintf(w, "mcp: %d steps of %d calls waiting %s (after 1 for warm-up), MaxConcurrency %d; %s echo calls through parley and as many through the SDK alone, interleaved (after %d each for warm-up); servers: this binary over stdio\n",
		o.mcpRounds, mcpStepCalls, mcpWait, mcpConcurrency, thousands(int64(o.mcpCalls)), mcpEchoWarmup)
	fmt.Fprintf(w, "history: %d chats each of %s prior messages per database; runs of %s at engine concurrency 1; %d POST /tool-results per chat (after 1 for warm-up)\n",
		o.historyChats, sizeList(o.historySizes), plural(o.historySteps, "step"), o.historyPosts)
	fmt.Fprintf(w, "facade: %d rounds (after %d for warm-up) of 2 kinds × streamed and not × through the facade and direct, interleaved, on a database of their own; engine defaults; model: a fake OpenAI server on loopback that answers at once\n",
		o.facadeRequests, facadeWarmup)
	fmt.Fprintf(w, "fair: %d acquisitions of %d each way (after %d for warm-up), interleaved, on a schema of its own (PostgreSQL)\n",
		o.fairRounds, fairMax, fairWarmup)
	var skipped []string
	for _, g := range groups {
		if o.skip[g] {
			skipped = append(skipped, g)
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(w, "skipped: %s\n", strings.Join(skipped, ", "))
	}
	fmt.Fprintln(w)
}
