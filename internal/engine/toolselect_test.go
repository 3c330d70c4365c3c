package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// namedTools is a dispatcher over server-side tools of these names, each
// answering "ok"; ran counts each one's invocations.
func namedTools(t *testing.T, names ...string) (*tools.Dispatcher, map[string]*atomic.Int64) {
	t.Helper()
	reg := tools.NewRegistry(nil)
	ran := map[string]*atomic.Int64{}
	for _, n := range names {
		count := &atomic.Int64{}
		ran[n] = count
		err := reg.AddTool(tool.Func(tool.Decl{Name: n, Description: "tool " + n, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, tool.Call) (tool.Result, error) {
				count.Add(1)
				return tool.JSON("ok"), nil
			}))
		if err != nil {
			t.Fatal(err)
		}
	}
	return tools.NewDispatcher(reg, tools.Options{}, nil), ran
}

// offeredTools lists the names of the tools a request to the fake offers.
func offeredTools(t *testing.T, r llmtest.Request) []string {
	t.Helper()
	var body struct {
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("request body: %v: %s", err, r.Body)
	}
	var names []string
	for _, tl := range body.Tools {
		names = append(names, tl.Function.Name)
	}
	return names
}

// TestChatToolSelection: a chat that selected server-side tools offers the
// model only those (and every dynamic tool); a call to a server-side tool
// it did not select gets an error result, the tool does not run, and the
// model hears why.
func TestChatToolSelection(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: "weather_now", Args: `{}`},
			{ID: "c2", Name: "secret_delete", Args: `{}`},
		}},
		llmtest.Turn{Text: "done"},
	)
	d, ran := namedTools(t, "weather_now", "weather_week", "github_search_issues", "github_delete_repo", "secret_delete")
	h.start(d)
	ask := chat.DynamicTool{Name: "ask_user", Description: "asks the user", InputSchema: json.RawMessage(`{"type":"object"}`)}
	raw, _ := json.Marshal("what is the weather?")
	c, err := h.svc.CreateChat(context.Background(), owner, service.NewChat{Message: raw, Title: "test chat",
		DynamicTools: []chat.DynamicTool{ask}, Tools: chat.ToolGlobs{"weather_*", "github_search_issues"}})
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(c.ID, chat.Waiting)

	reqs := h.waitRequests(2)
	want := []string{"weather_now", "weather_week", "github_search_issues", "ask_user"}
	for i, r := range reqs {
		if got := offeredTools(t, r); !slices.Equal(got, want) {
			t.Fatalf("request %d offers %v, want %v", i+1, got, want)
		}
	}
	if ran["weather_now"].Load() != 1 || ran["secret_delete"].Load() != 0 {
		t.Fatalf("runs: weather_now %d, secret_delete %d; want 1 and 0", ran["weather_now"].Load(), ran["secret_delete"].Load())
	}
	msgs := h.history(c.ID)
	if len(msgs) != 4 || msgs[2].Role != chat.RoleTool || len(msgs[2].Parts) != 2 {
		t.Fatalf("history: %+v", msgs)
	}
	if p := msgs[2].Parts[0]; p.ToolCallID != "c1" || p.IsError {
		t.Fatalf("the selected tool's result: %+v", p)
	}
	p := msgs[2].Parts[1]
	if p.ToolCallID != "c2" || !p.IsError || !strings.Contains(string(p.Output), `not available in this chat`) ||
		strings.Contains(string(p.Output), "github_delete_repo") {
		t.Fatalf("the unselected tool's result: %+v (%s)", p, p.Output)
	}
	if body := string(reqs[1].Body); !strings.Contains(body, `not available in this chat`) {
		t.Fatalf("the model is not told the tool is unavailable: %s", body)
	}
}

// TestChatWithoutSelectionOffersEveryTool: with no "tools" the model is
// offered every server-side tool; with [] none but the dynamic ones.
func TestChatWithoutSelectionOffersEveryTool(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(llmtest.Turn{Text: "a"}, llmtest.Turn{Text: "b"})
	d, _ := namedTools(t, "weather_now", "http_fetch")
	h.start(d)
	ask := chat.DynamicTool{Name: "ask_user", Description: "asks the user", InputSchema: json.RawMessage(`{"type":"object"}`)}
	raw, _ := json.Marshal("hi")
	all := h.create("hi")
	h.waitStatus(all.ID, chat.Waiting)
	none, err := h.svc.CreateChat(context.Background(), owner, service.NewChat{Message: raw, Title: "test chat",
		DynamicTools: []chat.DynamicTool{ask}, Tools: chat.ToolGlobs{}})
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(none.ID, chat.Waiting)
	reqs := h.waitRequests(2)
	if got := offeredTools(t, reqs[0]); !slices.Equal(got, []string{"weather_now", "http_fetch"}) {
		t.Fatalf("no selection offers %v", got)
	}
	if got := offeredTools(t, reqs[1]); !slices.Equal(got, []string{"ask_user"}) {
		t.Fatalf("an empty selection offers %v", got)
	}
}
