package lua_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/llm/openai"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/sqlite"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/internal/tools/lua"
)

type models map[string]llm.Model

func (m models) Model(name string) (llm.Model, bool) { v, ok := m[name]; return v, ok }

// TestLuaToolInAChat runs a chat whose model calls a Lua tool twice in one
// step, through the engine, the dispatcher and the OpenAI fake: the tool is
// offered to the model, and its results reach the model's next request.
func TestLuaToolInAChat(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	script := filepath.Join(t.TempDir(), "weather.lua")
	if err := os.WriteFile(script, []byte(`
local seen = 0
tool{
  name = "weather",
  description = "Current weather in a city",
  input_schema = {properties = {city = {type = "string"}}, required = {"city"}},
  handler = function(input)
    seen = seen + 1
    sleep(0.01)
    return {city = input.city, temp_c = 21, seen = seen}
  end,
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := lua.Open("weather", script, lua.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry(log)
	if err := reg.AddSource(ctx, src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })

	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "parley.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.InTx(ctx, func(tx store.Tx) error { _, err := tx.CreateOwner(ctx, "alice"); return err }); err != nil {
		t.Fatal(err)
	}
	ps := memory.New()
	t.Cleanup(func() { ps.Close() })

	fake := llmtest.NewOpenAIChat(t)
	fake.Push(
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: "weather", Args: `{"city":"Paris"}`},
			{ID: "c2", Name: "weather", Args: `{"city":"Oslo"}`},
		}},
		llmtest.Turn{Text: "Paris and Oslo are both 21°C"},
	)
	provider := openai.NewChat(openai.Config{BaseURL: fake.URL, APIKey: "test-key"})
	ms := models{"fake": {Name: "fake", Provider: provider, ModelID: "gpt-test"}}
	ecfg := engine.Config{Concurrency: 2, LeaseTTL: 2 * time.Second, Heartbeat: 100 * time.Millisecond,
		PollInterval: 50 * time.Millisecond, MaxSteps: 5, DeltaFlush: time.Millisecond,
		Retry: llm.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}}
	eng := engine.New(ecfg, st, ps, ms, tools.NewDispatcher(reg, tools.Options{}, log), log)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "fake", Provider: "openai", Model: "gpt-test"}}
	cfg.DefaultModel = "fake"
	svc := service.New(st, ps, &cfg, log)
	msg, _ := json.Marshal("weather in Paris and Oslo?")
	c, err := svc.CreateChat(ctx, "alice", service.NewChat{Message: msg, Title: "weather"})
	if err != nil {
		t.Fatal(err)
	}

	end := time.Now().Add(10 * time.Second)
	for {
		got, err := st.GetChat(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == chat.Waiting && len(fake.Requests()) >= 2 {
			break
		}
		if got.Status == chat.Error || time.Now().After(end) {
			t.Fatalf("chat is %s (last_error %+v)", got.Status, got.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}

	reqs := fake.Requests()
	first := compact(reqs[0].Body)
	if !strings.Contains(first, `"name":"weather"`) || !strings.Contains(first, `"required":["city"]`) {
		t.Errorf("the first request does not offer the Lua tool: %s", first)
	}
	second := compact(reqs[1].Body)
	for _, want := range []string{
		`"tool_call_id":"c1"`, `"tool_call_id":"c2"`,
		// seen is read after the sleep: 2 for both, as both calls were in
		// flight together in the one state.
		`{\"city\":\"Paris\",\"seen\":2,\"temp_c\":21}`,
		`{\"city\":\"Oslo\",\"seen\":2,\"temp_c\":21}`,
	} {
		if !strings.Contains(second, want) {
			t.Errorf("the second request lacks %s: %s", want, second)
		}
	}
}

func compact(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
