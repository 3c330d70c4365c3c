package catalog

import (
	"context"
	"log/slog"
	"strings"
	"sync"
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
	c, err := New(cfg, func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
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
	if _, err := New(cfg, func(string) string { return "" }, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a missing api_key_env variable must fail at start")
	}
}

// records keeps the log records it handles.
type records struct {
	mu sync.Mutex
	rs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rs = append(h.rs, r)
	return nil
}

// String lists the records, one "LEVEL message k=v ..." a line.
func (h *records) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, r := range h.rs {
		b.WriteString(r.Level.String() + " " + r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
		b.WriteString("\n")
	}
	return b.String()
}

// A model without api_key_env takes its provider's standard variable, or is
// warned about when there is none; a model with a base_url of its own never
// gets that key.
func TestAPIKeyFallback(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-anthropic", "K": "sk-named"}
	getenv := func(k string) string { return env[k] }
	none := func(string) string { return "" }
	for _, tc := range []struct {
		name    string
		model   config.Model
		getenv  func(string) string
		wantKey string
		wantLog string // "" when nothing is logged
	}{
		{"named variable", config.Model{Name: "m", Provider: "openai", APIKeyEnv: "K"}, getenv, "sk-named", ""},
		{"openai fallback", config.Model{Name: "m", Provider: "openai"}, getenv, "sk-openai",
			"INFO model has no api_key_env; using the provider's standard variable model=m variable=OPENAI_API_KEY"},
		{"responses fallback", config.Model{Name: "m", Provider: "openai-responses"}, getenv, "sk-openai",
			"INFO model has no api_key_env; using the provider's standard variable model=m variable=OPENAI_API_KEY"},
		{"anthropic fallback", config.Model{Name: "m", Provider: "anthropic"}, getenv, "sk-anthropic",
			"INFO model has no api_key_env; using the provider's standard variable model=m variable=ANTHROPIC_API_KEY"},
		{"no key anywhere", config.Model{Name: "m", Provider: "openai"}, none, "",
			"WARN model has no API key: its calls will fail; set api_key_env, or OPENAI_API_KEY model=m provider=openai"},
		{"own base_url", config.Model{Name: "m", Provider: "openai", BaseURL: "http://127.0.0.1:11434/v1"}, getenv, "", ""},
		{"echo", config.Model{Name: "m", Provider: "echo"}, getenv, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &records{}
			key, err := apiKey(tc.model, tc.getenv, slog.New(h))
			if err != nil {
				t.Fatal(err)
			}
			if key != tc.wantKey {
				t.Errorf("key %q, want %q", key, tc.wantKey)
			}
			want := ""
			if tc.wantLog != "" {
				want = tc.wantLog + "\n"
			}
			if got := h.String(); got != want {
				t.Errorf("log:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
