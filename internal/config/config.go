// Package config reads parley's configuration once, at start: defaults, then
// the YAML file, then PARLEY_* environment variables, then command-line flags,
// each overriding the one before. The result is passed explicitly to whatever
// needs it; nothing reads the environment later.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/internal/chat"
)

// Config is parley's whole configuration.
type Config struct {
	Listen       string  `yaml:"listen"`
	DataDir      string  `yaml:"data_dir"`
	Database     string  `yaml:"database"`
	DefaultModel string  `yaml:"default_model"`
	Models       []Model `yaml:"models"`
	Tools        Tools   `yaml:"tools"`
	Limits       Limits  `yaml:"limits"`
}

// Model is a name clients use, bound to a provider's model.
type Model struct {
	Name      string `yaml:"name"`
	Provider  string `yaml:"provider"` // openai | openai-responses | anthropic | echo
	Model     string `yaml:"model"`
	BaseURL   string `yaml:"base_url"`
	APIKeyEnv string `yaml:"api_key_env"`
	Price     *Price `yaml:"price"`
}

// Price is a model's cost per million tokens.
type Price struct {
	InputPerMTok  float64 `yaml:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok"`
}

// Providers lists the accepted values of Model.Provider.
var Providers = []string{"openai", "openai-responses", "anthropic", "echo"}

// Tools configures server-side tool sources.
type Tools struct {
	Lua []LuaSource `yaml:"lua"`
}

// LuaSource is one Lua tool source: a file or a folder of .lua files.
type LuaSource struct {
	Name string `yaml:"name"`
	Path string `yaml:"path"`
}

// Limits bounds what clients may ask of the server.
type Limits struct {
	ToolResultTimeout  Duration `yaml:"tool_result_timeout"`   // default requires_action deadline
	MaxSteps           int      `yaml:"max_steps"`             // model calls per run
	MaxBodyBytes       int64    `yaml:"max_body_bytes"`        // request body size (413 beyond)
	MaxDynamicTools    int      `yaml:"max_dynamic_tools"`     // per chat
	MaxToolSchemaBytes int      `yaml:"max_tool_schema_bytes"` // one input_schema
	MaxLabels          int      `yaml:"max_labels"`            // per chat
	MaxMessageBytes    int      `yaml:"max_message_bytes"`     // text of one user message
}

// Chat returns the limits the chat package validates with.
func (l Limits) Chat() chat.Limits {
	lim := chat.DefaultLimits
	lim.MaxDynamicTools = l.MaxDynamicTools
	lim.MaxToolSchemaBytes = l.MaxToolSchemaBytes
	lim.MaxLabels = l.MaxLabels
	lim.MaxMessageBytes = l.MaxMessageBytes
	return lim
}

// Duration is a time.Duration written as "10m" or "30s" in YAML.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (like 90s or 10m): %w", n.Line, n.Value, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Overrides are the settings given as flags; empty fields do not override.
type Overrides struct {
	ConfigFile string
	Listen     string
	DataDir    string
	Database   string
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	cl := chat.DefaultLimits
	return Config{
		Listen:  "127.0.0.1:8080",
		DataDir: "./parley-data",
		Limits: Limits{
			ToolResultTimeout:  Duration(10 * time.Minute),
			MaxSteps:           50,
			MaxBodyBytes:       1 << 20,
			MaxDynamicTools:    cl.MaxDynamicTools,
			MaxToolSchemaBytes: cl.MaxToolSchemaBytes,
			MaxLabels:          cl.MaxLabels,
			MaxMessageBytes:    cl.MaxMessageBytes,
		},
	}
}

// Load builds the configuration from defaults, the YAML file (flag, else
// PARLEY_CONFIG; none is fine), the environment (getenv, normally os.Getenv)
// and the flags, then checks it.
func Load(flags Overrides, getenv func(string) string) (*Config, error) {
	cfg := Default()
	file := first(flags.ConfigFile, getenv("PARLEY_CONFIG"))
	if file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("config %s: %w", file, err)
		}
	}
	cfg.Listen = first(flags.Listen, getenv("PARLEY_LISTEN"), cfg.Listen)
	cfg.DataDir = first(flags.DataDir, getenv("PARLEY_DATA_DIR"), cfg.DataDir)
	cfg.Database = first(flags.Database, getenv("PARLEY_DATABASE_URL"), cfg.Database)
	if cfg.Database == "" {
		cfg.Database = "sqlite://" + filepath.Join(cfg.DataDir, "parley.db")
	}
	if len(cfg.Models) == 0 {
		cfg.Models = []Model{{Name: "echo", Provider: "echo", Model: "echo"}}
	}
	if cfg.DefaultModel == "" {
		cfg.DefaultModel = cfg.Models[0].Name
	}
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return &cfg, nil
}

// Backend names the database kind of a URL: "sqlite" or "postgres".
func Backend(databaseURL string) (kind, dsn string, err error) {
	switch {
	case strings.HasPrefix(databaseURL, "sqlite://"):
		return "sqlite", strings.TrimPrefix(databaseURL, "sqlite://"), nil
	case strings.HasPrefix(databaseURL, "postgres://"), strings.HasPrefix(databaseURL, "postgresql://"):
		return "postgres", databaseURL, nil
	}
	return "", "", fmt.Errorf("database %q: want sqlite://PATH or postgres://...", databaseURL)
}

// FindModel returns the configured model of that name.
func (c *Config) FindModel(name string) (Model, bool) {
	for _, m := range c.Models {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}

func (c *Config) check() error {
	if _, _, err := Backend(c.Database); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, m := range c.Models {
		if m.Name == "" {
			return fmt.Errorf("models[%d]: name is required", i)
		}
		if seen[m.Name] {
			return fmt.Errorf("models[%d]: name %q is used twice", i, m.Name)
		}
		seen[m.Name] = true
		if !slices.Contains(Providers, m.Provider) {
			return fmt.Errorf("models[%d] (%s): provider %q is not one of %s", i, m.Name, m.Provider, strings.Join(Providers, ", "))
		}
	}
	if !seen[c.DefaultModel] {
		return fmt.Errorf("default_model %q is not among the models", c.DefaultModel)
	}
	l := c.Limits
	if l.ToolResultTimeout <= 0 || l.MaxSteps <= 0 || l.MaxBodyBytes <= 0 || l.MaxDynamicTools < 0 ||
		l.MaxToolSchemaBytes <= 0 || l.MaxLabels < 0 || l.MaxMessageBytes <= 0 {
		return errors.New("limits: every limit must be positive")
	}
	for i, s := range c.Tools.Lua {
		if s.Name == "" || s.Path == "" {
			return fmt.Errorf("tools.lua[%d]: name and path are required", i)
		}
	}
	return nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
