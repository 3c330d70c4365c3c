package lua

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/tool"
)

// barrierScript's "barrier" call returns ok only once input.n calls of its
// group have arrived, all still waiting: it proves they were in flight
// together in one state. "span" sleeps and reports when it started and ended.
const barrierScript = `
local arrived = {}
tool{
  name = "barrier",
  input_schema = {properties = {group = {type = "string"}, n = {type = "integer"}}},
  handler = function(input)
    arrived[input.group] = (arrived[input.group] or 0) + 1
    local give_up = now() + 5
    while arrived[input.group] < input.n do
      if now() > give_up then return nil, "only " .. arrived[input.group] .. " calls arrived" end
      sleep(0.002)
    end
    return "ok"
  end,
}
tool{
  name = "span",
  handler = function(input)
    local start = now()
    sleep(input.seconds)
    return {start = start, stop = now()}
  end,
}
local n = 0
tool{name = "count", handler = function() n = n + 1; return n end}
`

type span struct{ Start, Stop float64 }

func spans(t *testing.T, res []tool.Result) []span {
	t.Helper()
	out := make([]span, len(res))
	for i, r := range res {
		if err := json.Unmarshal([]byte(okJSON(t, r)), &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestWaitsInOneBatchOverlap(t *testing.T) {
	s := openSource(t, barrierScript)
	const n = 100
	var calls []tool.Call
	for i := range n {
		calls = append(calls, newCall(fmt.Sprint("c", i), "span", `{"seconds":0.2}`))
	}
	start := time.Now()
	res := invoke(t, s, calls...)
	took := time.Since(start)
	sp := spans(t, res)
	var lastStart, firstStop float64 = 0, 1e18
	for _, x := range sp {
		lastStart = max(lastStart, x.Start)
		firstStop = min(firstStop, x.Stop)
	}
	if lastStart >= firstStop {
		t.Errorf("the calls were not all in flight together: the last started at %.3f, the first ended at %.3f", lastStart, firstStop)
	}
	if took > 2*time.Second { // one after the other would take 20s
		t.Errorf("%d calls sleeping 200ms each took %s", n, took)
	}

	// The same with a barrier: every call must be waiting at once.
	calls = calls[:0]
	for i := range n {
		calls = append(calls, newCall(fmt.Sprint("b", i), "barrier", `{"group":"one","n":100}`))
	}
	for i, r := range invoke(t, s, calls...) {
		if got := okJSON(t, r); got != `"ok"` {
			t.Fatalf("call %d: %s", i, got)
		}
	}
}

func TestBatchesFromTwoChatsInterleave(t *testing.T) {
	s := openSource(t, barrierScript)
	var wg sync.WaitGroup
	results := make([][]tool.Result, 2)
	for g := range 2 {
		wg.Go(func() {
			var calls []tool.Call
			for i := range 5 {
				c := newCall(fmt.Sprintf("g%d-%d", g, i), "barrier", `{"group":"two","n":10}`)
				c.ChatID = fmt.Sprint("chat-", g)
				calls = append(calls, c)
			}
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			res, err := s.InvokeBatch(ctx, calls)
			if err != nil {
				t.Error(err)
			}
			results[g] = res
		})
	}
	wg.Wait()
	for g, res := range results {
		for i, r := range res {
			if got := okJSON(t, r); got != `"ok"` {
				t.Errorf("batch %d call %d: %s (the two batches did not run at once)", g, i, got)
			}
		}
	}
}

func TestStatePersistsAcrossBatches(t *testing.T) {
	s := openSource(t, barrierScript)
	for want := 1; want <= 3; want++ {
		if got := okJSON(t, invokeOne(t, s, "count", `{}`)); got != fmt.Sprint(want) {
			t.Fatalf("batch %d: count = %s", want, got)
		}
	}
	res := invoke(t, s, newCall("a", "count", `{}`), newCall("b", "count", `{}`))
	if a, b := okJSON(t, res[0]), okJSON(t, res[1]); a != "4" || b != "5" {
		t.Fatalf("one batch of two: %s, %s", a, b)
	}
}

func TestResultsKeepCallOrder(t *testing.T) {
	s := openSource(t, `
tool{name = "echo", handler = function(input) sleep(input.d); return input.v end}`)
	res := invoke(t, s,
		newCall("a", "echo", `{"d":0.05,"v":"a"}`),
		newCall("b", "echo", `{"d":0,"v":"b"}`),
		newCall("c", "echo", `{"d":0.02,"v":"c"}`))
	for i, want := range []string{`"a"`, `"b"`, `"c"`} {
		if got := okJSON(t, res[i]); got != want {
			t.Errorf("result %d = %s, want %s", i, got, want)
		}
	}
}

func TestToolsListsDeclarations(t *testing.T) {
	s := openSource(t, `
tool{name = "a", description = "first", input_schema = {properties = {x = {type = "integer"}}, required = {"x"}}, handler = function() end}
tool{name = "b", handler = function() end}
tool{name = "c", input_schema = {type = "object", properties = {}, required = {}}, handler = function() end}`)
	decls, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []tool.Decl{
		{Name: "a", Description: "first", InputSchema: json.RawMessage(`{"properties":{"x":{"type":"integer"}},"required":["x"],"type":"object"}`)},
		{Name: "b", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
		{Name: "c", InputSchema: json.RawMessage(`{"properties":{},"required":[],"type":"object"}`)},
	}
	if len(decls) != len(want) {
		t.Fatalf("decls: %+v", decls)
	}
	for i := range want {
		if decls[i].Name != want[i].Name || decls[i].Description != want[i].Description || string(decls[i].InputSchema) != string(want[i].InputSchema) {
			t.Errorf("decl %d = %s %q %s, want %s %q %s", i, decls[i].Name, decls[i].Description, decls[i].InputSchema,
				want[i].Name, want[i].Description, want[i].InputSchema)
		}
	}
}
