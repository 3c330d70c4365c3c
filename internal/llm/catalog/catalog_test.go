package catalog

import (
	"testing"

	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/llm"
)

func TestNew(t *testing.T) {
	cfg := &config.Config{Models: []config.Model{
		{Name: "fast", Provider: "openai", Model: "gpt-5-mini", APIKeyEnv: "K", Price: &config.Price{InputPerMTok: 0.25, OutputPerMTok: 2}},
		{Name: "resp", Provider: "openai-responses", Model: "gpt-5"},
		{Name: "claude", Provider: "anthropic", Model: "claude-x"},
		{Name: "echo", Provider: "echo"},
	}}
	env := map[string]string{"K": "secret"}
	c, err := New(cfg, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.Model("fast")
	if !ok || m.ModelID != "gpt-5-mini" || m.Provider == nil {
		t.Fatalf("fast: %+v %v", m, ok)
	}
	// 1000 input tokens at 0.25/Mtok = 250 micro-units; 100 output at 2/Mtok = 200.
	if got := m.Cost(llm.Usage{InputTokens: 1000, OutputTokens: 100}); got != 450 {
		t.Fatalf("cost = %d, want 450", got)
	}
	for _, name := range []string{"resp", "claude", "echo"} {
		if _, ok := c.Model(name); !ok {
			t.Errorf("model %s missing", name)
		}
	}
	if _, ok := c.Model("nope"); ok {
		t.Error("unknown model found")
	}
	if _, err := New(cfg, func(string) string { return "" }); err == nil {
		t.Error("a missing api_key_env variable must fail at start")
	}
}
