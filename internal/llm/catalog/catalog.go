// Package catalog builds the configured models (config `models`) into
// providers, once at start.
package catalog

import (
	"fmt"

	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/anthropic"
	"github.com/parleyhq/parley/internal/llm/echo"
	"github.com/parleyhq/parley/internal/llm/openai"
)

// Catalog holds the configured models by name. It is read-only after New.
type Catalog struct {
	models map[string]llm.Model
}

// New builds every model of cfg. API keys are read through getenv from the
// variable each model names (api_key_env); a named variable that is unset is
// an error, so a missing key shows at start, not on the first chat.
func New(cfg *config.Config, getenv func(string) string) (*Catalog, error) {
	c := &Catalog{models: make(map[string]llm.Model, len(cfg.Models))}
	for _, m := range cfg.Models {
		key := ""
		if m.APIKeyEnv != "" {
			if key = getenv(m.APIKeyEnv); key == "" {
				return nil, fmt.Errorf("model %s: environment variable %s (api_key_env) is not set", m.Name, m.APIKeyEnv)
			}
		}
		var p llm.Provider
		switch m.Provider {
		case "openai":
			p = openai.NewChat(openai.Config{Model: m.Model, BaseURL: m.BaseURL, APIKey: key})
		case "openai-responses":
			p = openai.NewResponses(openai.Config{Model: m.Model, BaseURL: m.BaseURL, APIKey: key})
		case "anthropic":
			p = anthropic.New(anthropic.Config{Model: m.Model, BaseURL: m.BaseURL, APIKey: key})
		case "echo":
			p = echo.New()
		default:
			return nil, fmt.Errorf("model %s: unknown provider %q", m.Name, m.Provider)
		}
		lm := llm.Model{Name: m.Name, Provider: p, ModelID: m.Model,
			ContextWindow: m.Window(), CompactAt: m.CompactFraction(), CompactionModel: m.CompactionModel}
		if m.Price != nil {
			lm.InputPerMTok, lm.OutputPerMTok = m.Price.InputPerMTok, m.Price.OutputPerMTok
		}
		c.models[m.Name] = lm
	}
	return c, nil
}

// Model returns the model configured under name.
func (c *Catalog) Model(name string) (llm.Model, bool) {
	m, ok := c.models[name]
	return m, ok
}
