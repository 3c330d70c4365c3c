package chaos

// The checks once the faults are over: every chat settles (an error is
// retried and must then end waiting), by SQL and through the API every
// history keeps the invariant and has no duplicate, and every server-side
// tool's effect happened at most once (exactly once for a call that
// succeeded, never for a denied one).

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store/postgres"
	"github.com/parleyhq/parley/internal/testutil/invariant"
)

// settleAll waits, within ctx, until every chat is waiting: a chat in error
// is retried once (POST /retry) and driven again, and must then end
// waiting. It fails the test with the chats that did not settle. It
// returns the error kinds the chats went through, with how many of each.
func (w *workload) settleAll(ctx context.Context, concurrency int) map[string]int {
	var (
		mu        sync.Mutex
		unsettled []string
		kinds     = map[string]int{}
		wg        sync.WaitGroup
	)
	fail := func(p *plan, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		unsettled = append(unsettled, fmt.Sprintf("%s (%s): %s", p.label, p.id, fmt.Sprintf(format, args...)))
	}
	jobs := make(chan *plan)
	for range concurrency {
		wg.Go(func() {
			for p := range jobs {
				if p.id == "" {
					fail(p, "never created")
					continue
				}
				for retried := false; ; retried = true {
					c, err := w.settle(ctx, p.id)
					if err != nil {
						fail(p, "%v", err)
						break
					}
					if c.Status == chat.Waiting {
						break
					}
					kind := "(no last_error)"
					if c.LastError != nil {
						kind = c.LastError.Kind
					}
					mu.Lock()
					kinds[kind]++
					mu.Unlock()
					if c.LastError == nil || c.LastError.Kind == "" {
						fail(p, "in error without a stated kind: %+v", c.LastError)
						break
					}
					if retried {
						fail(p, "in error again after POST /retry: %+v", c.LastError)
						break
					}
					if err := w.retry(ctx, p.id); err != nil {
						fail(p, "%v", err)
						break
					}
				}
			}
		})
	}
	for _, p := range w.plans {
		jobs <- p
	}
	close(jobs)
	wg.Wait()
	if len(unsettled) > 0 {
		sort.Strings(unsettled)
		w.t.Errorf("%d of %d chats did not settle in waiting:\n%s", len(unsettled), len(w.plans), strings.Join(unsettled, "\n"))
	}
	return kinds
}

// retry posts POST /retry to a chat in error; an unknown answer is resolved
// by reading the chat (it left error if the retry went through).
func (w *workload) retry(ctx context.Context, id string) error {
	for attempt := 0; ; attempt++ {
		code, err := w.cl.try(ctx, http.MethodPost, "/api/v1/chats/"+id+"/retry", nil, nil)
		if err == nil {
			return nil
		}
		if !retryable(code, err) {
			return fmt.Errorf("POST /retry: %w", err)
		}
		var c chat.Chat
		if err := w.cl.read(ctx, "/api/v1/chats/"+id, &c); err != nil {
			return err
		}
		if c.Status != chat.Error {
			return nil
		}
		if perr := pause(ctx, attempt); perr != nil {
			return fmt.Errorf("POST /retry: %w (last: %v)", perr, err)
		}
	}
}

// outcomes tallies how the workload's calls ended, by kind: "ok", or the
// start of their error output.
type outcomes map[string]map[string]int

func (o outcomes) add(kind, outcome string) {
	if o[kind] == nil {
		o[kind] = map[string]int{}
	}
	o[kind][outcome]++
}

// check runs every check of the settled cluster, by SQL on dsn and through
// the API, and returns how the calls ended.
func (w *workload) check(ctx context.Context, dsn string, rec *recorder) outcomes {
	t := w.t
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect for the checks: %v", err)
	}
	defer conn.Close(context.Background())

	// By SQL: every chat waiting, nothing left queued, no message twice.
	var chats, notWaiting, queued int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status <> 'waiting') FROM chats`).Scan(&chats, &notWaiting); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM queued_messages`).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if chats != len(w.plans) || notWaiting != 0 || queued != 0 {
		t.Errorf("by SQL: %d chats (want %d), %d not waiting, %d queued messages (want 0, 0)", chats, len(w.plans), notWaiting, queued)
	}
	rows, err := conn.Query(ctx, `SELECT chat_id, role, parts::text, count(*) FROM messages
		GROUP BY chat_id, role, parts::text HAVING count(*) > 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, role, parts string
		var n int
		if err := rows.Scan(&id, &role, &parts, &n); err != nil {
			t.Fatal(err)
		}
		t.Errorf("by SQL: chat %s has %d identical %s messages: %s", id, n, role, clip(parts, 400))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sqlIDs := map[string][]int64{}
	rows, err = conn.Query(ctx, `SELECT chat_id, id FROM messages ORDER BY chat_id, id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var mid int64
		if err := rows.Scan(&id, &mid); err != nil {
			t.Fatal(err)
		}
		sqlIDs[id] = append(sqlIDs[id], mid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// The history invariant, read through parley's store.
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open the store for the invariant check: %v", err)
	}
	defer st.Close()
	invariant.Check(t, st)

	// Through the API: the same messages, the invariant again, each turn's
	// message once, each planned call once with one result, and the effects.
	counts, by := rec.counts()
	seen := map[string]bool{} // recorder keys that belong to a call in a history
	out := outcomes{}
	for _, p := range w.plans {
		if p.id == "" {
			continue
		}
		var c chat.Chat
		if err := w.cl.read(ctx, "/api/v1/chats/"+p.id, &c); err != nil {
			t.Fatal(err)
		}
		msgs, err := w.history(ctx, p.id)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, m := range msgs {
			ids = append(ids, m.ID)
		}
		if !slices.Equal(ids, sqlIDs[p.id]) {
			t.Errorf("chat %s: the API shows messages %v, SQL %v", p.label, ids, sqlIDs[p.id])
		}
		if err := chat.CheckHistory(c.Status, msgs, invariant.MayWait(c, msgs)); err != nil {
			t.Errorf("chat %s (%s) through the API: %v", p.label, p.id, err)
		}
		w.checkPlan(p, msgs, counts, by, seen, out)
	}
	for key, n := range counts {
		if !seen[key] {
			t.Errorf("the recorder has %d effects of %s, which no call in any history made", n, key)
		}
	}
	return out
}

// checkPlan checks one chat's history against its plan and the recorder.
func (w *workload) checkPlan(p *plan, msgs []chat.Message, counts map[string]int, by map[string][]string, seen map[string]bool, out outcomes) {
	t := w.t
	type found struct {
		call    chat.Part
		results []chat.Part
	}
	// The calls and their results of each user message's answer, by the
	// message's text.
	calls := map[string][]*found{}
	var text string
	byID := map[string]*found{}
	for _, m := range msgs {
		if m.Role == chat.RoleUser && len(m.Parts) == 1 {
			text = m.Parts[0].Text
		}
		for _, part := range m.Parts {
			switch part.Type {
			case chat.PartToolCall:
				f := &found{call: part}
				byID[part.ToolCallID] = f
				calls[text] = append(calls[text], f)
			case chat.PartToolResult:
				if f := byID[part.ToolCallID]; f != nil {
					f.results = append(f.results, part)
				}
			}
		}
	}
	p.mu.Lock()
	sent := p.sent
	decisions := maps.Clone(p.decisions)
	p.mu.Unlock()
	for ti, tr := range p.turns {
		n := 0
		for _, m := range msgs {
			if m.Role == chat.RoleUser && len(m.Parts) == 1 && m.Parts[0].Text == tr.text {
				n++
			}
		}
		if want := min(1, max(0, sent-ti)); n != want {
			t.Errorf("chat %s: turn %d's message is in the history %d times, want %d", p.label, ti+1, n, want)
		}
		if n == 0 {
			continue
		}
		for _, pc := range tr.calls {
			var match []*found
			for _, f := range calls[tr.text] {
				if f.call.ToolName == pc.tool && jsonEqual(f.call.Args, pc.args) {
					match = append(match, f)
				}
			}
			if len(match) != 1 {
				t.Errorf("chat %s: the call %s %s is in the history %d times, want once", p.label, pc.tool, pc.args, len(match))
				continue
			}
			f := match[0]
			if len(f.results) != 1 {
				continue // the invariant check reports it
			}
			res := f.results[0]
			outcome := "ok"
			if res.IsError {
				var s string
				json.Unmarshal(res.Output, &s)
				if strings.HasPrefix(s, "denied: chaos denies") {
					s = "denied" // the reason names the call
				}
				outcome = "error: " + clip(s, 48)
			}
			out.add(pc.kind, outcome)
			if pc.key == "" {
				continue
			}
			seen[pc.key] = true
			switch {
			case effectful(pc.kind):
				n := counts[pc.key]
				approved, decided := decisions[pc.key]
				switch {
				case n > 1:
					t.Errorf("chat %s: the effect of %s (%s) happened %d times: %v", p.label, pc.key, f.call.ToolCallID, n, by[pc.key])
				case !res.IsError && n != 1:
					t.Errorf("chat %s: %s (%s) succeeded but its effect happened %d times", p.label, pc.key, f.call.ToolCallID, n)
				case pc.kind == kindApproval && decided && !approved && n != 0:
					t.Errorf("chat %s: %s was denied but its effect happened", p.label, pc.key)
				}
				if pc.kind != kindFetch {
					for _, who := range by[pc.key] {
						if who != p.id+"/"+f.call.ToolCallID {
							t.Errorf("chat %s: the effect of %s was made by call %s, want %s/%s", p.label, pc.key, who, p.id, f.call.ToolCallID)
						}
					}
				}
			case !res.IsError && !strings.Contains(string(res.Output), pc.key):
				t.Errorf("chat %s: the %s call %s succeeded with %s, which lacks its key", p.label, pc.kind, f.call.ToolCallID, clip(string(res.Output), 200))
			}
		}
	}
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
