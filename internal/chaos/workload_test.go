package chaos

// The workload: chats whose messages make the echo model call every kind of
// tool, driven by a client that answers dynamic tool calls and approvals
// the way a racing, retrying client does, while the faults are injected
// between batches of chats.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
)

// Tool kinds a turn can call, one call each.
const (
	kindFetch    = "fetch"    // built-in http_fetch, GET from the recorder: an effect
	kindTime     = "time"     // built-in current_time: no effect
	kindLua      = "lua"      // Lua record, POST to the recorder: an effect
	kindMCP      = "mcp"      // the MCP reference server's echo: counted by its result
	kindClient   = "client"   // a dynamic tool the test's client answers
	kindApproval = "approval" // Lua guarded_record, after a person's decision: an effect if approved
)

var kinds = []string{kindFetch, kindTime, kindLua, kindMCP, kindClient, kindApproval}

// effectful reports whether a kind's call has an effect the recorder counts.
func effectful(kind string) bool {
	return kind == kindFetch || kind == kindLua || kind == kindApproval
}

// toolCall is one call a turn asks for.
type toolCall struct {
	kind string
	key  string // names the call in its args, the recorder and the checks ("" for time)
	tool string
	args string
}

// turn is one user message and the calls it makes the model make.
type turn struct {
	text  string
	calls []toolCall
}

// plan is what the workload does with one chat.
type plan struct {
	label string // the chat's "chaos" label: finds it after an ambiguous create
	turns []turn

	mu        sync.Mutex
	id        string
	sent      int             // turns whose message is in the history
	decisions map[string]bool // approval key -> approved
}

// makePlans makes n chats' plans from rng: one turn, or two for about a
// third, each calling two to four kinds of tool at once.
func makePlans(rng *rand.Rand, n int, recorderURL string) []*plan {
	plans := make([]*plan, n)
	for i := range plans {
		p := &plan{label: fmt.Sprintf("c%04d", i), decisions: map[string]bool{}}
		turns := 1
		if rng.IntN(3) == 0 {
			turns = 2
		}
		for ti := range turns {
			picked := append([]string(nil), kinds...)
			rng.Shuffle(len(picked), func(a, b int) { picked[a], picked[b] = picked[b], picked[a] })
			picked = picked[:2+rng.IntN(3)]
			var tr turn
			var text strings.Builder
			fmt.Fprintf(&text, "chaos chat %s, turn %d\n", p.label, ti+1)
			for _, k := range picked {
				c := toolCall{kind: k, key: fmt.Sprintf("%s-t%d-%s", p.label, ti+1, k)}
				switch k {
				case kindFetch:
					c.tool, c.args = "http_fetch", fmt.Sprintf(`{"url":%q}`, recorderURL+"/effect?key="+c.key)
				case kindTime:
					c.key, c.tool, c.args = "", "current_time", `{"timezone":"Europe/Paris"}`
				case kindLua:
					c.tool, c.args = "record", fmt.Sprintf(`{"key":%q}`, c.key)
				case kindMCP:
					c.tool, c.args = "everything_echo", fmt.Sprintf(`{"message":%q}`, c.key)
				case kindClient:
					c.tool, c.args = "client_lookup", fmt.Sprintf(`{"key":%q}`, c.key)
				case kindApproval:
					c.tool, c.args = "guarded_record", fmt.Sprintf(`{"key":%q}`, c.key)
				}
				fmt.Fprintf(&text, "/call %s %s\n", c.tool, c.args)
				tr.calls = append(tr.calls, c)
			}
			tr.text = text.String()
			p.turns = append(p.turns, tr)
		}
		plans[i] = p
	}
	return plans
}

// clientTool is the dynamic tool every chat declares: its calls wait for
// the test's client.
var clientTool = map[string]any{
	"name":          "client_lookup",
	"description":   "Looks a key up on the client's side.",
	"input_schema":  json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`),
	"output_schema": json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"},"answer":{"type":"string"}},"required":["key","answer"]}`),
}

// approves decides a person's answer to an approval from its key alone, so
// both racing posts carry the same decision: about one in four is denied.
func approves(key string) bool {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32()%4 != 0
}

// client is the test's HTTP client of the cluster: each request goes to a
// replica that is up, in turn.
type client struct {
	c     *cluster
	http  *http.Client
	token string

	serverErrors atomic.Int64 // 500 answers (a replica's fault, logged)
	unavailable  atomic.Int64 // 503 answers and failed connections
}

func newClient(c *cluster) *client {
	return &client{c: c, token: c.token, http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}}
}

// errNoReplica: every replica is down at this instant.
var errNoReplica = errors.New("no replica is up")

// try sends one request to a replica that is up and decodes a 2xx answer
// into out. A transport error or a 5xx answer leaves it unknown whether a
// write happened.
func (cl *client) try(ctx context.Context, method, path string, body, out any) (int, error) {
	base := cl.c.pick()
	if base == "" {
		return 0, errNoReplica
	}
	return cl.doAt(ctx, base, method, path, body, out)
}

func (cl *client) doAt(ctx context.Context, base, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+cl.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.http.Do(req)
	if err != nil {
		cl.unavailable.Add(1)
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		cl.unavailable.Add(1)
		return 0, err
	}
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable:
		cl.unavailable.Add(1)
		return resp.StatusCode, fmt.Errorf("%s %s: 503 %s", method, path, b)
	case resp.StatusCode >= 500:
		cl.serverErrors.Add(1)
		return resp.StatusCode, fmt.Errorf("%s %s at %s: %d %s", method, path, base, resp.StatusCode, b)
	case resp.StatusCode >= 300:
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode, nil
}

// retryable reports whether a request that failed so may be sent again:
// the connection failed, or the server could not serve it.
func retryable(code int, err error) bool {
	return err != nil && (code == 0 || code >= 500)
}

// pause waits a little before a request is tried again, or until ctx ends.
func pause(ctx context.Context, attempt int) error {
	d := min(time.Duration(attempt+1)*50*time.Millisecond, time.Second)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// read sends a GET until it gets an answer (a read is safe to repeat).
func (cl *client) read(ctx context.Context, path string, out any) error {
	for attempt := 0; ; attempt++ {
		code, err := cl.try(ctx, http.MethodGet, path, nil, out)
		if !retryable(code, err) {
			return err
		}
		if perr := pause(ctx, attempt); perr != nil {
			return fmt.Errorf("GET %s: %w (last: %v)", path, perr, err)
		}
	}
}

// racing tallies the racing client's double posts: how many pairs had one
// winner, how many had none because the winner's answer was lost (the
// commit happened, the connection broke), and the double wins (a bug).
type racing struct {
	pairs, oneWon, lostWin, twoWon atomic.Int64
}

// workload drives the plans through the cluster.
type workload struct {
	t     *testing.T
	cl    *client
	race  racing
	plans []*plan
}

// drive runs p's chat: creates it, sends its turns one after the other,
// and answers what it waits for, until its last turn is answered or it
// fails (an error status: the final check retries it).
func (w *workload) drive(ctx context.Context, p *plan) error {
	if err := w.create(ctx, p); err != nil {
		return err
	}
	for i := range p.turns {
		if i > 0 {
			if err := w.send(ctx, p, i); err != nil {
				return err
			}
		}
		c, err := w.settle(ctx, p.id)
		if err != nil {
			return err
		}
		if c.Status == chat.Error {
			return nil // settleAll retries it
		}
	}
	return nil
}

// create creates p's chat with its first turn. After an answer that leaves
// it unknown whether the chat was made, it looks for the chat by label
// before it tries again, so a chat is never made twice.
func (w *workload) create(ctx context.Context, p *plan) error {
	body := map[string]any{
		"title":         "chaos " + p.label,
		"labels":        map[string]string{"chaos": p.label},
		"message":       p.turns[0].text,
		"dynamic_tools": []any{clientTool},
	}
	for attempt := 0; ; attempt++ {
		var c chat.Chat
		code, err := w.cl.try(ctx, http.MethodPost, "/api/v1/chats", body, &c)
		if err == nil {
			p.mu.Lock()
			p.id, p.sent = c.ID, 1
			p.mu.Unlock()
			return nil
		}
		if !retryable(code, err) {
			return fmt.Errorf("create chat %s: %w", p.label, err)
		}
		var list struct{ Chats []chat.Chat }
		if err := w.cl.read(ctx, "/api/v1/chats?label="+p.query(), &list); err != nil {
			return err
		}
		if len(list.Chats) > 0 {
			p.mu.Lock()
			p.id, p.sent = list.Chats[0].ID, 1
			p.mu.Unlock()
			return nil
		}
		if perr := pause(ctx, attempt); perr != nil {
			return fmt.Errorf("create chat %s: %w (last: %v)", p.label, perr, err)
		}
	}
}

// send posts turn i's message; after an ambiguous answer it looks for the
// message in the history before it tries again.
func (w *workload) send(ctx context.Context, p *plan, i int) error {
	text := p.turns[i].text
	for attempt := 0; ; attempt++ {
		code, err := w.cl.try(ctx, http.MethodPost, "/api/v1/chats/"+p.id+"/messages", map[string]any{"message": text}, nil)
		if err == nil {
			break
		}
		if !retryable(code, err) {
			return fmt.Errorf("chat %s: send turn %d: %w", p.label, i+1, err)
		}
		msgs, herr := w.history(ctx, p.id)
		if herr != nil {
			return herr
		}
		if hasUserText(msgs, text) {
			break
		}
		if perr := pause(ctx, attempt); perr != nil {
			return fmt.Errorf("chat %s: send turn %d: %w (last: %v)", p.label, i+1, perr, err)
		}
	}
	p.mu.Lock()
	p.sent = i + 1
	p.mu.Unlock()
	return nil
}

func hasUserText(msgs []chat.Message, text string) bool {
	for _, m := range msgs {
		if m.Role == chat.RoleUser && len(m.Parts) == 1 && m.Parts[0].Text == text {
			return true
		}
	}
	return false
}

// history reads a chat's messages through the API, page by page.
func (w *workload) history(ctx context.Context, id string) ([]chat.Message, error) {
	var all []chat.Message
	after := int64(0)
	for {
		var page struct{ Messages []chat.Message }
		if err := w.cl.read(ctx, fmt.Sprintf("/api/v1/chats/%s/messages?limit=500&after=%d", id, after), &page); err != nil {
			return nil, err
		}
		all = append(all, page.Messages...)
		if len(page.Messages) < 500 {
			return all, nil
		}
		after = page.Messages[len(page.Messages)-1].ID
	}
}

// settle polls the chat until it is waiting or in error, answering its
// dynamic tool calls and approvals on the way.
func (w *workload) settle(ctx context.Context, id string) (chat.Chat, error) {
	for attempt := 0; ; attempt++ {
		var c chat.Chat
		if err := w.cl.read(ctx, "/api/v1/chats/"+id, &c); err != nil {
			return c, fmt.Errorf("chat %s: %w", id, err)
		}
		switch c.Status {
		case chat.Waiting, chat.Error:
			return c, nil
		case chat.RequiresAction:
			if err := w.act(ctx, c); err != nil {
				return c, err
			}
			attempt = 0
			continue
		}
		if err := pause(ctx, min(attempt, 6)); err != nil {
			return c, fmt.Errorf("chat %s is still %s: %w", id, c.Status, err)
		}
	}
}

// act answers what a requires_action chat waits for: its client calls with
// results, its approvals with decisions, each posted twice at once.
func (w *workload) act(ctx context.Context, c chat.Chat) error {
	var results, decisions []map[string]any
	decided := map[string]bool{}
	for _, tc := range c.RequiredAction.ToolCalls {
		var args struct{ Key string }
		json.Unmarshal(tc.Args, &args)
		switch tc.Kind {
		case chat.ActionClient:
			results = append(results, map[string]any{"tool_call_id": tc.ToolCallID,
				"output": map[string]string{"key": args.Key, "answer": "the client's answer for " + args.Key}})
		case chat.ActionApproval:
			ok := approves(args.Key)
			decided[args.Key] = ok
			d := map[string]any{"tool_call_id": tc.ToolCallID, "approve": ok}
			if !ok {
				d["reason"] = "chaos denies " + args.Key
			}
			decisions = append(decisions, d)
		}
	}
	if len(results) > 0 {
		if err := w.racePost(ctx, c.ID, "tool-results", map[string]any{"results": results}); err != nil {
			return err
		}
	}
	if len(decisions) > 0 {
		p, err := w.planOf(c)
		if err != nil {
			return err
		}
		p.mu.Lock()
		for k, v := range decided {
			p.decisions[k] = v
		}
		p.mu.Unlock()
		if err := w.racePost(ctx, c.ID, "approvals", map[string]any{"decisions": decisions}); err != nil {
			return err
		}
	}
	return nil
}

// planOf finds the plan of a chat by its label.
func (w *workload) planOf(c chat.Chat) (*plan, error) {
	for _, p := range w.plans {
		if p.label == c.Labels["chaos"] {
			return p, nil
		}
	}
	return nil, fmt.Errorf("chat %s has no plan (labels %v)", c.ID, c.Labels)
}

// racePost posts body to the chat's route from two goroutines at once, each
// trying again while its answer is unknown. At most one may win (200); the
// other must get 409. Both get 409 when the winner's answer was lost.
func (w *workload) racePost(ctx context.Context, id, route string, body any) error {
	codes := make([]int, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			for attempt := 0; ; attempt++ {
				code, err := w.cl.try(ctx, http.MethodPost, "/api/v1/chats/"+id+"/"+route, body, nil)
				if !retryable(code, err) {
					codes[i], errs[i] = code, err
					return
				}
				if perr := pause(ctx, attempt); perr != nil {
					errs[i] = fmt.Errorf("%w (last: %v)", perr, err)
					return
				}
			}
		})
	}
	wg.Wait()
	w.race.pairs.Add(1)
	won := 0
	for i, code := range codes {
		switch {
		case code == http.StatusOK:
			won++
		case code == http.StatusConflict:
		default:
			return fmt.Errorf("chat %s: racing POST %s: %d %v", id, route, code, errs[i])
		}
	}
	switch won {
	case 0:
		w.race.lostWin.Add(1)
	case 1:
		w.race.oneWon.Add(1)
	default:
		w.race.twoWon.Add(1)
		w.t.Errorf("chat %s: both racing POSTs to %s won (200, 200)", id, route)
	}
	return nil
}

// run drives every plan with concurrency drivers at once. The plans are
// handed out in len(faults)+1 batches; between two batches the next fault
// is injected, once the cluster recovered from the one before. So each
// fault lands among chats in flight, whatever the machine's speed. It
// returns how many faults were injected and the drivers' errors.
func (w *workload) run(ctx context.Context, c *cluster, concurrency int, faults []fault) (int, []error) {
	jobs := make(chan *plan)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range concurrency {
		wg.Go(func() {
			for p := range jobs {
				if err := w.drive(ctx, p); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("chat %s (%s): %w", p.label, p.id, err))
					mu.Unlock()
				}
			}
		})
	}
	injected := 0
	ready := make(chan struct{})
	close(ready)
	var recovered <-chan struct{} = ready
	batch := len(w.plans) / (len(faults) + 1)
	for i, p := range w.plans {
		if k := i/batch - 1; i%batch == 0 && k >= 0 && k < len(faults) {
			select {
			case <-recovered:
			case <-ctx.Done():
			}
			w.t.Logf("fault %d of %d after %d chats: %v", k+1, len(faults), i, faults[k])
			recovered = c.inject(faults[k])
			injected++
		}
		select {
		case jobs <- p:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case <-recovered:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("the cluster did not recover from the last fault: %w", ctx.Err()))
	}
	return injected, errs
}

// query is the label filter that finds p's chat, escaped for a URL.
func (p *plan) query() string { return url.QueryEscape("chaos:" + p.label) }
