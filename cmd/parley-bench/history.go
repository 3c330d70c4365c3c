package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/store"
)

// historyOptions sizes the history measurement: whether a step, and a
// submission of tool results, cost more on a long chat than on a short one.
type historyOptions struct {
	sizes []int // prior messages of the chats; the last size is compared with the first
	chats int   // chats per size
	steps int   // model calls per run
	posts int   // POST /tool-results timed per chat, after one for warm-up
}

// historyResult is what the history measurement found, per size.
type historyResult struct {
	gaps  map[int]latencies // parley's time between two model calls of a run
	first map[int]latencies // a run's acquisition → its first model call
	posts map[int]latencies // POST /tool-results, as the client sees it
}

// historyBatch is how many history messages one setup transaction inserts.
const historyBatch = 2000

// historyChat is one chat of the history measurement.
type historyChat struct {
	id   string
	size int // prior messages
}

// measureHistory builds o.chats chats per size of o.sizes straight in the
// store, each with that many prior messages, then times parley on them.
// First the engine (concurrency 1, so one run at a time) runs each chat for
// o.steps model calls, o.steps-1 of them calls of the server-side tool
// noop; the instant model records when each call starts and returns, and
// parley's time for a step after the run's first is the time from one
// call's return to the next call's start (the first step's is the time
// from the chat's acquisition to its first call). Then, with the engine
// stopped, each chat is put in requires_action for one call of its dynamic
// tool (an assistant message with the call, straight in the store) and the
// client submits its result, 1+o.posts times; every submission but the
// first is timed.
func measureHistory(ctx context.Context, r *replica, o historyOptions, log *slog.Logger) (historyResult, error) {
	res := historyResult{gaps: map[int]latencies{}, first: map[int]latencies{}, posts: map[int]latencies{}}
	if err := createOwner(ctx, r.st); err != nil {
		return res, err
	}
	chats, err := insertHistories(ctx, r.st, o.sizes, o.chats)
	if err != nil {
		return res, err
	}
	if err := analyze(ctx, r.st); err != nil {
		return res, err
	}
	if err := measureRuns(ctx, r, chats, o.steps, res, log); err != nil {
		return res, err
	}
	if err := measureSubmissions(ctx, r, chats, o.posts, res.posts, log); err != nil {
		return res, err
	}
	for _, m := range []map[int]latencies{res.gaps, res.first, res.posts} {
		for _, l := range m {
			slices.Sort(l)
		}
	}
	return res, nil
}

// insertHistories creates perSize waiting chats for each size, with the
// dynamic tool client_op, each with that many prior messages
// (historyMessage), in transactions of historyBatch messages with reserved
// ids. The chats come back interleaved (one of each size, then the next),
// the order the measurements take them in, so that a slower spell of the
// machine falls on every size alike.
func insertHistories(ctx context.Context, st store.Store, sizes []int, perSize int) ([]historyChat, error) {
	var chats []historyChat
	for range perSize {
		for _, n := range sizes {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, err
			}
			chats = append(chats, historyChat{id: id.String(), size: n})
		}
	}
	err := st.InTx(ctx, func(tx store.Tx) error {
		for _, hc := range chats {
			c := chat.Chat{ID: hc.id, Owner: owner, Title: "bench", Model: modelName, Status: chat.Waiting,
				DynamicTools: []chat.DynamicTool{clientTool}, Labels: map[string]string{}}
			if err := tx.InsertChat(ctx, &c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history: insert chats: %w", err)
	}
	var batch []chat.Message
	tails := map[string][]chat.Message{} // each chat's last messages, once inserted
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		// Reserved ids let the PostgreSQL store send a batch's inserts
		// together instead of one round trip each.
		for i := 0; i < len(batch); {
			ids, err := st.ReserveMessageIDs(ctx, min(1000, len(batch)-i))
			if err != nil {
				return fmt.Errorf("history: reserve message ids: %w", err)
			}
			for _, id := range ids {
				batch[i].ID = id
				i++
			}
		}
		err := st.InTx(ctx, func(tx store.Tx) error {
			for i := range batch {
				if err := tx.InsertMessage(ctx, &batch[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("history: insert messages: %w", err)
		}
		for _, m := range batch {
			t := append(tails[m.ChatID], m)
			tails[m.ChatID] = t[max(0, len(t)-historyVerbatim):]
		}
		batch = batch[:0]
		return nil
	}
	for _, hc := range chats {
		for i := range hc.size {
			batch = append(batch, historyMessage(hc.id, i, hc.size))
			if len(batch) == historyBatch {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	// A long chat has been compacted, as it would have been on its way:
	// the model sees a summary, then its last turns.
	for _, hc := range chats {
		if c, ok := historyCompaction(hc.id, tails[hc.id]); hc.size > historyVerbatim && ok {
			batch = append(batch, c)
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return chats, nil
}

// analyze has PostgreSQL gather the statistics of the tables the history
// setup just filled, as autovacuum keeps them on a server that runs: on a
// fresh schema the planner has none, and its default guesses for the
// filters of a chat's reads (its answers, in force) choose a plan that
// reads and sorts a whole long history. SQLite needs nothing.
func analyze(ctx context.Context, st store.Store) error {
	pg, ok := st.(interface{ Pool() *pgxpool.Pool })
	if !ok {
		return nil
	}
	if _, err := pg.Pool().Exec(ctx, "ANALYZE chats, messages"); err != nil {
		return fmt.Errorf("history: analyze: %w", err)
	}
	return nil
}

// historyVerbatim is how many of a long history's last messages stay
// verbatim after its compaction, at most.
const historyVerbatim = 12

// historyCompaction is a compaction of a history that keeps its tail from
// the tail's first user message on verbatim; false if the tail has none
// after its first message.
func historyCompaction(chatID string, tail []chat.Message) (chat.Message, bool) {
	for i := 1; i < len(tail); i++ {
		if tail[i].Role == chat.RoleUser {
			return chat.Message{ChatID: chatID, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartCompaction,
				Summary: historyAnswer, Source: chat.CompactAuto, ThroughMessageID: tail[i-1].ID}}}, true
		}
	}
	return chat.Message{}, false
}

// Texts of the generated histories: a user's question and an assistant's
// answer of typical lengths.
const (
	historyQuestion = "How does the next part of the plan fit with what we settled on before? Keep it short, please."
	historyAnswer   = "It fits: the earlier decision fixed the interface, and this part only fills in what sits behind it. " +
		"The one thing to watch is the order of the writes, which must stay as it was, so that a reader never sees " +
		"half of a change. I would start with the tests that pin that order down, then move the code under them, " +
		"and keep the old path until the new one has run for a day without surprises."
)

// historyMessage returns message i of a generated history of n messages:
// turns of a user message and an assistant's answer, every fifth turn with
// a call of the tool noop and its result between the two, so a history is
// 12 messages per five turns. It never ends on a call without its result:
// a history cut there ends on the assistant's answer instead.
func historyMessage(chatID string, i, n int) chat.Message {
	m := chat.Message{ChatID: chatID}
	call := "hist_" + strconv.Itoa(i/12)
	switch k := i % 12; {
	case k%2 == 0 && k < 10:
		m.Role, m.Parts = chat.RoleUser, []chat.Part{chat.TextPart(historyQuestion)}
	case k == 9 && i < n-1:
		m.Role, m.Parts = chat.RoleAssistant, []chat.Part{{Type: chat.PartToolCall, ToolCallID: call, ToolName: "noop",
			Args: json.RawMessage(`{"query":"what was settled","limit":5}`)}}
	case k == 10:
		m.Role, m.Parts = chat.RoleTool, []chat.Part{{Type: chat.PartToolResult, ToolCallID: call, ToolName: "noop",
			Output: json.RawMessage(`{"ok":true,"items":["the interface","the order of the writes"]}`)}}
	default:
		m.Role, m.Parts = chat.RoleAssistant, []chat.Part{chat.TextPart(historyAnswer)}
	}
	if m.Role == chat.RoleAssistant {
		m.Usage = &chat.Usage{InputTokens: int64(40 * i), OutputTokens: 90}
	}
	return m
}

// measureRuns gives every chat a user message, makes it pending and runs
// the engine, at concurrency 1, until every chat is waiting again after
// steps model calls. It adds to res.gaps, per size, parley's time between
// two consecutive model calls of a run (steps-1 per chat), and to
// res.first the time from the chat's acquisition to its first model call
// (the first step, which reads the history).
func measureRuns(ctx context.Context, r *replica, chats []historyChat, steps int, res historyResult, log *slog.Logger) error {
	err := r.st.InTx(ctx, func(tx store.Tx) error {
		for _, hc := range chats {
			m := chat.Message{ChatID: hc.id, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("go on")}}
			if err := tx.InsertMessage(ctx, &m); err != nil {
				return err
			}
			if _, err := tx.TransitionChat(ctx, hc.id, store.Transition{From: chat.Waiting, To: chat.Pending}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("history: make the chats pending: %w", err)
	}
	disp, err := noopTools()
	if err != nil {
		return err
	}
	model := newTimedModel(stepper{steps: steps})
	ws := &acquireClock{watchStore: newWatchStore(r.st, int64(len(chats))), at: map[string]time.Time{}}
	// Concurrency 1: one run at a time, so a step's time is its own, with
	// no other run's writes in its commits. The pending chats are acquired
	// at the engine's start, each next one when a run ends.
	cfg := engine.Config{Concurrency: 1, PollInterval: time.Hour, MaxSteps: steps}
	stop := runEngine(engine.New(cfg, ws, r.ps, models{model}, disp, log))
	defer stop()
	timeout := time.Minute + time.Duration(len(chats)*steps)*100*time.Millisecond
	select {
	case <-ws.done:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return fmt.Errorf("history: only %d of %d chats became waiting within %s", ws.waiting.Load(), len(chats), timeout)
	}
	stop()
	checked := map[int]bool{}
	for _, hc := range chats {
		calls := model.calls(hc.id)
		if len(calls) != steps {
			return fmt.Errorf("history: chat %s (%d prior messages) made %d model calls, want %d", hc.id, hc.size, len(calls), steps)
		}
		for k := 1; k < len(calls); k++ {
			res.gaps[hc.size] = append(res.gaps[hc.size], calls[k].start.Sub(calls[k-1].end))
		}
		if at, ok := ws.acquired(hc.id); ok {
			res.first[hc.size] = append(res.first[hc.size], calls[0].start.Sub(at))
		}
		if !checked[hc.size] { // the first chat of each size
			checked[hc.size] = true
			if err := checkHistoryRun(ctx, r.st, hc, steps); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkHistoryRun checks that a chat's run ended waiting, with its prior
// messages (and compaction), the user message, and per step an assistant message (and a
// tool message for each tool step).
func checkHistoryRun(ctx context.Context, st store.Store, hc historyChat, steps int) error {
	c, err := st.GetChat(ctx, hc.id)
	if err != nil {
		return fmt.Errorf("history: check run: %w", err)
	}
	n := 0
	if err := store.ForEachMessage(ctx, st, hc.id, 0, func(chat.Message) error { n++; return nil }); err != nil {
		return fmt.Errorf("history: check run: %w", err)
	}
	want := hc.size + 1 + steps + steps - 1
	if hc.size > historyVerbatim {
		want++ // its compaction
	}
	if c.Status != chat.Waiting || n != want {
		return fmt.Errorf("history: chat %s is %s with %d messages (last_error %v), want waiting with %d", hc.id, c.Status, n, c.LastError, want)
	}
	return nil
}

// measureSubmissions serves the replica's API and, with no engine running,
// puts every chat in requires_action and submits the result of its one
// open call through the Go client, 1+posts rounds; every round but the
// first adds each submission's time to posts, per size. A round puts the
// chats in requires_action in one transaction: for a waiting chat a user
// message, and for every chat an assistant message calling client_op, then
// the status changes up to requires_action (with a deadline an hour away,
// as the engine sets one). A submission leaves its chat pending; at the end
// the chats are made waiting again.
func measureSubmissions(ctx context.Context, r *replica, chats []historyChat, posts int, times map[int]latencies, log *slog.Logger) error {
	url, stopAPI, err := serveAPI(r, benchConfig(), log)
	if err != nil {
		return err
	}
	defer stopAPI()
	token, _, err := auth.Issue(ctx, r.st, owner, "bench-history")
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer hc.CloseIdleConnections()
	c := client.New(url, token, client.WithHTTPClient(hc))

	from := chat.Waiting
	for round := range 1 + posts {
		callID := "dyn_" + strconv.Itoa(round)
		err := r.st.InTx(ctx, func(tx store.Tx) error {
			for _, ch := range chats {
				var msgs []chat.Message
				if from == chat.Waiting {
					msgs = append(msgs, chat.Message{ChatID: ch.id, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart(historyQuestion)}})
				}
				msgs = append(msgs, chat.Message{ChatID: ch.id, Role: chat.RoleAssistant, Usage: &chat.Usage{InputTokens: 1, OutputTokens: 1},
					Parts: []chat.Part{{Type: chat.PartToolCall, ToolCallID: callID, ToolName: clientTool.Name, Args: json.RawMessage(`{}`)}}})
				for i := range msgs {
					if err := tx.InsertMessage(ctx, &msgs[i]); err != nil {
						return err
					}
				}
				path := []store.Transition{{From: chat.Pending, To: chat.Running},
					{From: chat.Running, To: chat.RequiresAction, ActionTimeout: time.Hour}}
				if from == chat.Waiting {
					path = append([]store.Transition{{From: chat.Waiting, To: chat.Pending}}, path...)
				}
				for _, tr := range path {
					if _, err := tx.TransitionChat(ctx, ch.id, tr); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("history: put the chats in requires_action: %w", err)
		}
		from = chat.Pending
		output, _ := json.Marshal("done")
		for _, ch := range chats {
			start := time.Now()
			got, err := c.SubmitToolResults(ctx, ch.id, []client.ToolResult{{ToolCallID: callID, Output: output}})
			d := time.Since(start)
			if err != nil {
				return fmt.Errorf("history: submit tool results to chat %s (%d prior messages): %w", ch.id, ch.size, err)
			}
			if got.Status != client.StatusPending {
				return fmt.Errorf("history: chat %s is %s after its tool results, want pending", ch.id, got.Status)
			}
			if round > 0 {
				times[ch.size] = append(times[ch.size], d)
			}
		}
	}
	err = r.st.InTx(ctx, func(tx store.Tx) error {
		for _, ch := range chats {
			if _, err := tx.TransitionChat(ctx, ch.id, store.Transition{From: chat.Pending, To: chat.Waiting}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("history: make the chats waiting again: %w", err)
	}
	return nil
}

// stepper is the instant model of the history runs: it answers as instant
// does, but counts only the assistant messages after the last user message
// (the chats have long histories of their own), walking back from the end,
// so it costs the same whatever the history's length.
type stepper struct{ steps int }

func (p stepper) Stream(_ context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	done := 0
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != chat.RoleUser; i-- {
		if req.Messages[i].Role == chat.RoleAssistant {
			done++
		}
	}
	return answerStep(done, p.steps, len(req.Messages), emit)
}

// acquireClock is a watchStore that also records when AcquireChats
// returned each chat.
type acquireClock struct {
	*watchStore
	mu sync.Mutex
	at map[string]time.Time
}

func (s *acquireClock) AcquireChats(ctx context.Context, a store.Acquire) ([]chat.Chat, []store.Lease, error) {
	cs, ls, err := s.watchStore.AcquireChats(ctx, a)
	now := time.Now()
	s.mu.Lock()
	for _, c := range cs {
		s.at[c.ID] = now
	}
	s.mu.Unlock()
	return cs, ls, err
}

// acquired returns when the chat was acquired last.
func (s *acquireClock) acquired(chatID string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.at[chatID]
	return at, ok
}

// modelCall is when one model call started and returned.
type modelCall struct{ start, end time.Time }

// timedModel wraps a model and records, per chat, when each of its calls
// started and returned: what is not between the two is parley's time.
type timedModel struct {
	p    llm.Provider
	mu   sync.Mutex
	byID map[string][]modelCall
}

func newTimedModel(p llm.Provider) *timedModel {
	return &timedModel{p: p, byID: map[string][]modelCall{}}
}

func (m *timedModel) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	start := time.Now()
	res, err := m.p.Stream(ctx, req, emit)
	end := time.Now()
	if len(req.Messages) > 0 {
		id := req.Messages[0].ChatID
		m.mu.Lock()
		m.byID[id] = append(m.byID[id], modelCall{start, end})
		m.mu.Unlock()
	}
	return res, err
}

// calls returns the chat's model calls in the order they were made.
func (m *timedModel) calls(chatID string) []modelCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.byID[chatID])
}

// historyRows measures the history rows on one database: per size, the
// median and p99 of parley's time per step after a run's first and of POST
// /tool-results, and for each the ratio of the largest size's median to the
// smallest's, which must stay within 2.
func (b *bench) historyRows(ctx context.Context, db string, r *replica) {
	o := b.o
	ho := historyOptions{sizes: o.historySizes, chats: o.historyChats, steps: o.historySteps, posts: o.historyPosts}
	b.step("history, %s: %d chats each of %s prior messages; runs of %s; %d tool-result submissions per chat",
		db, ho.chats, sizeList(ho.sizes), plural(ho.steps, "step"), ho.posts)
	res, err := measureHistory(ctx, r, ho, b.log)
	stepMetric := func(n int) string {
		return fmt.Sprintf("parley's time per step, model call excluded, after a run's first, %s, %s prior messages (%d runs × %d steps)",
			db, thousands(int64(n)), ho.chats, ho.steps-1)
	}
	postMetric := func(n int) string {
		return fmt.Sprintf("POST /tool-results, %s, %s prior messages (%d chats × %d)", db, thousands(int64(n)), ho.chats, ho.posts)
	}
	if err != nil {
		b.t.failed(stepMetric(ho.sizes[len(ho.sizes)-1])+": median", err)
		return
	}
	b.growthRows(ho.sizes, res.gaps, stepMetric,
		fmt.Sprintf("parley's time per step after a run's first, %s", db))
	b.growthRows(ho.sizes, res.posts, postMetric,
		fmt.Sprintf("POST /tool-results, %s", db))
	b.growthRows(ho.sizes, res.first, func(n int) string {
		return fmt.Sprintf("a run's first step, acquisition to first model call, %s, %s prior messages, compacted past %d (%d runs)",
			db, thousands(int64(n)), historyVerbatim, ho.chats)
	}, fmt.Sprintf("a run's first step (it reads the history from the newest compaction on), %s", db))
}

// growthRows adds, for each size, a row with the median (and the p99) of
// its samples, then a row comparing the last size's median with the
// first's, by ratio (at most 2× passes) and by difference, which says what
// the longer history costs whatever the base.
func (b *bench) growthRows(sizes []int, samples map[int]latencies, metric func(int) string, ratioMetric string) {
	for _, n := range sizes {
		l := samples[n]
		b.t.add(row{metric: metric(n) + ": median", value: fmt.Sprintf("%s (p99 %s)", ms(l.percentile(0.5)), ms(l.percentile(0.99)))})
	}
	first, last := sizes[0], sizes[len(sizes)-1]
	lo, hi := samples[first].percentile(0.5), samples[last].percentile(0.5)
	ratio := math.Inf(1)
	if lo > 0 {
		ratio = float64(hi) / float64(lo)
	}
	b.t.add(row{metric: fmt.Sprintf("%s: %s vs %s prior messages, medians", ratioMetric, thousands(int64(last)), thousands(int64(first))),
		value:  fmt.Sprintf("%s vs %s (%+.2f ms)", ms(hi), ms(lo), float64(hi-lo)/float64(time.Millisecond)),
		target: "≤ 2×",
		ratio:  fmt.Sprintf("%.2f×", ratio),
		pass:   verdict(ratio <= 2)})
}

// parseSizes reads -history-sizes: a comma-separated list of at least two
// message counts, each at least 1.
func parseSizes(list string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(strings.ReplaceAll(f, "_", ""))
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-history-sizes: %q is not a message count of at least 1", f)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) < 2 {
		return nil, fmt.Errorf("-history-sizes: want at least two sizes, the first compared with the last")
	}
	return sizes, nil
}

// sizeList formats sizes for a progress line: "10, 1,000 and 10,000".
func sizeList(sizes []int) string {
	s := make([]string, len(sizes))
	for i, n := range sizes {
		s[i] = thousands(int64(n))
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
