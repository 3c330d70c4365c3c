// Package catalog builds the configured models (config `models`) into
// providers, once at start.
package catalog

import (
	"fmt"
	"log/slog"

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

// New builds every model of cfg, logging to log what it decides about API
// keys (see apiKey).
func New(cfg *config.Config, getenv func(string) string, log *slog.Logger) (*Catalog, error) {
	c := &Catalog{models: make(map[string]llm.Model, len(cfg.Models))}
	for _, m := range cfg.Models {
		key, err := apiKey(m, getenv, log)
		if err != nil {
			return nil, err
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

// standardKeyEnv is the variable each provider's own tools read its API key
// from.
var standardKeyEnv = map[string]string{
	"openai":           "OPENAI_API_KEY",
	"openai-responses": "OPENAI_API_KEY",
	"anthropic":        "ANTHROPIC_API_KEY",
}

// apiKey returns the API key of m, read through getenv from the variable m
// names (api_key_env); that variable being unset is an error, so a missing
// key shows at start, not on the first chat. Without api_key_env, a model
// that calls its provider's own API (no base_url) takes the provider's
// standard variable (OPENAI_API_KEY, ANTHROPIC_API_KEY), saying so in the
// log, and one that finds no key there is warned about: its calls would
// fail. A model with a base_url of its own (a local server) never gets the
// standard variable, so that key does not reach another server.
func apiKey(m config.Model, getenv func(string) string, log *slog.Logger) (string, error) {
	if m.APIKeyEnv != "" {
		key := getenv(m.APIKeyEnv)
		if key == "" {
			return "", fmt.Errorf("model %s: environment variable %s (api_key_env) is not set", m.Name, m.APIKeyEnv)
		}
		return key, nil
	}
	env, ok := standardKeyEnv[m.Provider]
	if !ok || m.BaseURL != "" {
		return "", nil
	}
	if key := getenv(env); key != "" {
		log.Info("model has no api_key_env; using the provider's standard variable", "model", m.Name, "variable", env)
		return key, nil
	}
	log.Warn("model has no API key: its calls will fail; set api_key_env, or "+env, "model", m.Name, "provider", m.Provider)
	return "", nil
}

// Model returns the model configured under name.
func (c *Catalog) Model(name string) (llm.Model, bool) {
	m, ok := c.models[name]
	return m, ok
}
