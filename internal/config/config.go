// Package config reads parley's configuration once, at start: defaults, then
// the YAML file, then PARLEY_* environment variables, then command-line flags,
// each overriding the one before. The result is passed explicitly to whatever
// needs it; nothing reads the environment later.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/parleyhq/parley/internal/agent"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
)

// Config is parley's whole configuration.
type Config struct {
	Listen       string   `yaml:"listen"`
	DataDir      string   `yaml:"data_dir"`
	Database     string   `yaml:"database"`
	DefaultModel string   `yaml:"default_model"`
	Models       []Model  `yaml:"models"`
	Tools        Tools    `yaml:"tools"`
	Limits       Limits   `yaml:"limits"`
	Engine       Engine   `yaml:"engine"`
	Quotas       Quotas   `yaml:"quotas"`
	CORS         CORS     `yaml:"cors"`
	Webhooks     Webhooks `yaml:"webhooks"`
	Files        Files    `yaml:"files"`
	LogLevel     string   `yaml:"log_level"` // debug | info | warn | error
	// AgentEntries are the file's agents as written; Load checks them
	// into Agents, which every owner sees and none may change.
	AgentEntries []map[string]any `yaml:"agents"`
	Agents       []agent.Agent    `yaml:"-"`
	Subagents    Subagents        `yaml:"subagents"`
	// StructuredOutput tunes answers asked for as JSON (response_format).
	StructuredOutput StructuredOutput `yaml:"structured_output"`
}

// StructuredOutput tunes structured output (docs/structured-output.md).
type StructuredOutput struct {
	// MaxRepairs is how many times a turn's final answer that is not
	// valid against its format is sent back to the model to repair,
	// before the chat ends in error; 0 sends none back.
	MaxRepairs int `yaml:"max_repairs"`
}

// Quotas are what each owner may use (docs/operations.md): Defaults for
// every owner, which an admin may override per owner through the API.
type Quotas struct {
	Defaults quota.Limits `yaml:"defaults"`
}

// CORS lets browser apps on other origins call /api and /v1.
type CORS struct {
	// AllowedOrigins are exact origins ("https://app.example.com"); none
	// by default.
	AllowedOrigins []string `yaml:"allowed_origins"`
}

// Model is a name clients use, bound to a provider's model.
type Model struct {
	Name      string `yaml:"name"`
	Provider  string `yaml:"provider"` // openai | openai-responses | anthropic | echo
	Model     string `yaml:"model"`
	BaseURL   string `yaml:"base_url"`
	APIKeyEnv string `yaml:"api_key_env"`
	Price     *Price `yaml:"price"`
	// ContextWindow is the model's context window in tokens; 0: the
	// built-in one of a well-known model id, else unknown.
	ContextWindow int64 `yaml:"context_window"`
	// CompactAt is the fraction of the window at which a chat's history
	// is compacted before the next step; unset: 0.8 when the window is
	// known; 0 turns compaction off (a provider's overflow error still
	// compacts).
	CompactAt *float64 `yaml:"compact_at"`
	// CompactionModel names another configured model that writes the
	// summaries; "": the model itself.
	CompactionModel string `yaml:"compaction_model"`
	// Inputs are the kinds of content the model takes (InputText,
	// InputImage, InputPDF); none: the provider's default (InputKinds).
	Inputs []string `yaml:"inputs"`
}

// Window returns the model's context window in tokens: context_window, else
// the known window of its model id on the provider's own API (not behind
// a base_url, which may serve anything under that name), else 0 (unknown).
func (m Model) Window() int64 {
	if m.ContextWindow > 0 || m.BaseURL != "" {
		return m.ContextWindow
	}
	return knownWindow(m.Provider, m.Model)
}

// KnownWindow returns Window, nil when it is unknown (0): the window as
// the models routes show it.
func (m Model) KnownWindow() *int64 {
	if w := m.Window(); w > 0 {
		return &w
	}
	return nil
}

// CompactFraction returns the share of the window at which a chat is
// compacted: compact_at, else DefaultCompactAt when the window is known.
func (m Model) CompactFraction() float64 {
	if m.CompactAt != nil {
		return *m.CompactAt
	}
	if m.Window() > 0 {
		return DefaultCompactAt
	}
	return 0
}

// DefaultCompactAt is the fraction of a known context window at which a
// chat is compacted when a model does not say.
const DefaultCompactAt = 0.8

// Price is a model's cost per million tokens.
type Price struct {
	InputPerMTok  float64 `yaml:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok"`
}

// Providers lists the accepted values of Model.Provider.
var Providers = []string{"openai", "openai-responses", "anthropic", "echo"}

// Tools configures server-side tool sources.
type Tools struct {
	Lua        []LuaSource `yaml:"lua"`
	LuaRuntime LuaRuntime  `yaml:"lua_runtime"`
	MCP        []MCPServer `yaml:"mcp"`
	HTTPFetch  HTTPFetch   `yaml:"http_fetch"`
	// Approval overrides the approval policy of the tools whose names
	// match, built-in ones included; the first matching rule wins over the
	// tool's source's approval.
	Approval []ApprovalRule `yaml:"approval"`
	// MaxResultBytes caps the text of one tool result, server-side or
	// posted by a client; a longer one is cut, with a marker the model
	// sees (chat.Part.CapOutput). At most MaxResultBytesLimit.
	MaxResultBytes int `yaml:"max_result_bytes"`
}

// MaxResultBytesLimit is the largest tools.max_result_bytes: 8 MiB, about
// 2M tokens, more than any model's context window holds.
const MaxResultBytesLimit = 8 << 20

// Approval policies, the values of every approval key: whether a
// server-side tool's calls wait for a person to approve, edit or deny them.
// never: they run at once (the default). always: every call waits.
// destructive: a call waits unless its tool is annotated readOnlyHint true or
// destructiveHint false (a tool without annotations waits).
var ApprovalPolicies = []string{"never", "always", "destructive"}

// ApprovalRule sets the approval policy of the tools whose names, as the
// model sees them (an MCP tool's with its "<server>_" prefix), match a glob
// (path.Match syntax).
type ApprovalRule struct {
	Match    string `yaml:"match"`
	Approval string `yaml:"approval"` // never | always | destructive
}

// LuaRuntime sets the limits and permissions every Lua tool source runs
// with (docs/lua-tools.md).
type LuaRuntime struct {
	CallTimeout      Duration `yaml:"call_timeout"`       // one call, waits included
	BatchTimeout     Duration `yaml:"batch_timeout"`      // all the calls of one step to one source
	HTTPTimeout      Duration `yaml:"http_timeout"`       // an http.request that sets no timeout
	MaxResponseBytes int64    `yaml:"max_response_bytes"` // an http response body
	HTTPAllowHosts   []string `yaml:"http_allow_hosts"`   // hosts http.request may reach; none when empty
	ReloadInterval   Duration `yaml:"reload_interval"`    // how often scripts are checked for changes; 0 turns reloading off
}

// HTTPFetch configures the built-in http_fetch tool. By default it refuses
// loopback, private and link-local addresses.
type HTTPFetch struct {
	AllowPrivate bool     `yaml:"allow_private"` // allow every address
	AllowHosts   []string `yaml:"allow_hosts"`   // host names, IPs or CIDR ranges allowed even if private
}

// Engine tunes the workers that run chats (docs/configuration.md).
type Engine struct {
	Concurrency  int      `yaml:"concurrency"`   // chats one process runs at once
	LeaseTTL     Duration `yaml:"lease_ttl"`     // a lease not renewed for this long is recovered
	Heartbeat    Duration `yaml:"heartbeat"`     // how often a running chat's lease is renewed
	PollInterval Duration `yaml:"poll_interval"` // fallback poll for lost wake-ups, expired leases and deadlines
	// MaxRecoveries: a chat whose lease was recovered this many times in a
	// row (its run keeps killing its worker) ends in error.
	MaxRecoveries int `yaml:"max_recoveries"`
}

// LuaSource is one Lua tool source: a file or a folder of .lua files.
type LuaSource struct {
	Name string `yaml:"name"`
	Path string `yaml:"path"`
	// Approval is the approval policy of the source's tools (never when
	// empty) unless a tools.approval rule matches.
	Approval string `yaml:"approval"`
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
		return &valueError{node: n, msg: fmt.Sprintf("%q is not a duration (like 90s or 10m)", n.Value)}
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
	LogLevel   string
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	cl := chat.DefaultLimits
	return Config{
		Listen:   "127.0.0.1:8080",
		DataDir:  "./parley-data",
		LogLevel: "info",
		Limits: Limits{
			ToolResultTimeout:  Duration(10 * time.Minute),
			MaxSteps:           50,
			MaxBodyBytes:       1 << 20,
			MaxDynamicTools:    cl.MaxDynamicTools,
			MaxToolSchemaBytes: cl.MaxToolSchemaBytes,
			MaxLabels:          cl.MaxLabels,
			MaxMessageBytes:    cl.MaxMessageBytes,
		},
		Tools: Tools{MaxResultBytes: chat.DefaultMaxOutputBytes, LuaRuntime: LuaRuntime{
			CallTimeout:      Duration(30 * time.Second),
			BatchTimeout:     Duration(60 * time.Second),
			HTTPTimeout:      Duration(10 * time.Second),
			MaxResponseBytes: 1 << 20,
			ReloadInterval:   Duration(2 * time.Second),
		}},
		Files: Files{MaxBytes: DefaultFileMaxBytes},
		Engine: Engine{
			Concurrency:   64,
			LeaseTTL:      Duration(15 * time.Second),
			Heartbeat:     Duration(5 * time.Second),
			PollInterval:  Duration(2 * time.Second),
			MaxRecoveries: 3,
		},
		Webhooks:         defaultWebhooks(),
		Subagents:        Subagents{MaxDepth: DefaultSubagentDepth},
		StructuredOutput: StructuredOutput{MaxRepairs: 2},
	}
}

// Load builds the configuration from defaults, the YAML file (flag, else
// PARLEY_CONFIG; none is fine), the environment (getenv, normally os.Getenv)
// and the flags, then checks it.
func Load(flags Overrides, getenv func(string) string) (*Config, error) {
	cfg := Default()
	file := first(flags.ConfigFile, getenv("PARLEY_CONFIG"))
	var doc *yaml.Node // the file's tree, for the lines of errors
	if file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if doc, err = decodeFile(raw, &cfg); err != nil {
			return nil, fmt.Errorf("config %s: %w", file, err)
		}
	}
	// The settings a flag or variable gave: an error about one has no
	// line in the file.
	notFromFile := map[string]bool{
		"listen":    first(flags.Listen, getenv("PARLEY_LISTEN")) != "",
		"data_dir":  first(flags.DataDir, getenv("PARLEY_DATA_DIR")) != "",
		"database":  first(flags.Database, getenv("PARLEY_DATABASE_URL")) != "",
		"log_level": first(flags.LogLevel, getenv("PARLEY_LOG_LEVEL")) != "",
	}
	cfg.Listen = first(flags.Listen, getenv("PARLEY_LISTEN"), cfg.Listen)
	cfg.DataDir = first(flags.DataDir, getenv("PARLEY_DATA_DIR"), cfg.DataDir)
	cfg.Database = first(flags.Database, getenv("PARLEY_DATABASE_URL"), cfg.Database)
	cfg.LogLevel = first(flags.LogLevel, getenv("PARLEY_LOG_LEVEL"), cfg.LogLevel)
	if cfg.Database == "" {
		cfg.Database = "sqlite://" + filepath.Join(cfg.DataDir, "parley.db")
	}
	if len(cfg.Models) == 0 {
		cfg.Models = []Model{{Name: "echo", Provider: "echo", Model: "echo"}}
	}
	for i := range cfg.Models {
		if m := &cfg.Models[i]; m.Provider == "echo" && m.Model == "" {
			m.Model = "echo" // the offline model has one id, its own name
		}
	}
	if cfg.DefaultModel == "" {
		cfg.DefaultModel = cfg.Models[0].Name
	}
	if err := cfg.check(); err != nil {
		return nil, located(file, doc, err, notFromFile)
	}
	if err := cfg.resolveMCP(getenv); err != nil {
		return nil, located(file, doc, err, notFromFile)
	}
	return &cfg, nil
}

// Backend names the database kind of a URL: "sqlite" or "postgres".
func Backend(databaseURL string) (kind, dsn string, err error) {
	switch {
	case strings.HasPrefix(databaseURL, "sqlite://"):
		path := strings.TrimPrefix(databaseURL, "sqlite://")
		if path == "" {
			return "", "", fmt.Errorf("database %q: the SQLite URL has no path (want sqlite://PATH)", databaseURL)
		}
		return "sqlite", path, nil
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

// SlogLevel is LogLevel as a log/slog level (Load has checked it).
func (c *Config) SlogLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return slog.LevelInfo
	}
	return l
}

func (c *Config) check() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen %q: want HOST:PORT, like 127.0.0.1:8080 or :8080", c.Listen)
	}
	if c.DataDir == "" {
		return errors.New("data_dir must not be empty")
	}
	if _, _, err := Backend(c.Database); err != nil {
		return err
	}
	if err := new(slog.Level).UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	if err := c.checkModels(); err != nil {
		return err
	}
	if err := c.Limits.check(); err != nil {
		return err
	}
	if n := c.StructuredOutput.MaxRepairs; n < 0 || n > 10 {
		return fmt.Errorf("structured_output.max_repairs %d: want 0 to 10", n)
	}
	if err := c.CORS.check(); err != nil {
		return err
	}
	if err := c.Webhooks.check(); err != nil {
		return err
	}
	if err := c.Files.check(); err != nil {
		return err
	}
	if err := c.Quotas.Defaults.Check(); err != nil {
		return fmt.Errorf("quotas.defaults: %w", err)
	}
	if e := c.Engine; e.Concurrency <= 0 || e.LeaseTTL <= 0 || e.Heartbeat <= 0 || e.PollInterval <= 0 || e.MaxRecoveries <= 0 {
		return errors.New("engine: concurrency, lease_ttl, heartbeat, poll_interval and max_recoveries must be positive")
	}
	if c.Engine.Heartbeat >= c.Engine.LeaseTTL {
		return fmt.Errorf("engine: heartbeat (%s) must be shorter than lease_ttl (%s)", time.Duration(c.Engine.Heartbeat), time.Duration(c.Engine.LeaseTTL))
	}
	if err := c.Tools.LuaRuntime.check(); err != nil {
		return err
	}
	if err := c.checkAgents(); err != nil {
		return err
	}
	if n := c.Tools.MaxResultBytes; n <= 0 || n > MaxResultBytesLimit {
		return fmt.Errorf("tools.max_result_bytes %d: want a size from 1 to %d (8 MiB)", n, MaxResultBytesLimit)
	}
	names := map[string]bool{}
	for i, s := range c.Tools.Lua {
		if s.Name == "" || s.Path == "" {
			return fmt.Errorf("tools.lua[%d]: name and path are required", i)
		}
		if names[s.Name] {
			return fmt.Errorf("tools.lua[%d]: name %q is used twice", i, s.Name)
		}
		names[s.Name] = true
		if err := checkApproval(s.Approval, true); err != nil {
			return fmt.Errorf("tools.lua[%d] (%s): %w", i, s.Name, err)
		}
	}
	for i, r := range c.Tools.Approval {
		if _, err := path.Match(r.Match, ""); err != nil || r.Match == "" {
			return fmt.Errorf("tools.approval[%d]: match glob %q is malformed (want a pattern over tool names like \"github_*\")", i, r.Match)
		}
		if err := checkApproval(r.Approval, false); err != nil {
			return fmt.Errorf("tools.approval[%d] (%s): %w", i, r.Match, err)
		}
	}
	return nil
}

// checkApproval checks the value of an approval key; empty is allowed (and
// means never) where the key is optional.
func checkApproval(v string, optional bool) error {
	if v == "" && optional {
		return nil
	}
	if !slices.Contains(ApprovalPolicies, v) {
		return fmt.Errorf("approval %q is not one of %s", v, strings.Join(ApprovalPolicies, ", "))
	}
	return nil
}

func (c *Config) checkModels() error {
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
			return errUnknownProvider(i, m.Name, m.Provider)
		}
		if m.Model == "" && m.Provider != "echo" {
			return fmt.Errorf("models[%d] (%s): model (the provider's model id) is required", i, m.Name)
		}
		if m.BaseURL != "" {
			if u, err := url.Parse(m.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("models[%d] (%s): base_url %q is not an http(s) URL", i, m.Name, m.BaseURL)
			}
		}
		if p := m.Price; p != nil && (p.InputPerMTok < 0 || p.OutputPerMTok < 0) {
			return fmt.Errorf("models[%d] (%s): price must not be negative", i, m.Name)
		}
		if m.ContextWindow < 0 {
			return fmt.Errorf("models[%d] (%s): context_window must not be negative", i, m.Name)
		}
		if a := m.CompactAt; a != nil && (*a < 0 || *a >= 1) {
			return fmt.Errorf("models[%d] (%s): compact_at %g is not a fraction of the window (0 turns compaction off; else between 0 and 1, like 0.8)", i, m.Name, *a)
		}
		if err := checkInputs(m.Inputs); err != nil {
			return fmt.Errorf("models[%d] (%s): %w", i, m.Name, err)
		}
	}
	for i, m := range c.Models {
		if m.CompactionModel != "" && (!seen[m.CompactionModel] || m.CompactionModel == m.Name) {
			return fmt.Errorf("models[%d] (%s): compaction_model %q is not another configured model", i, m.Name, m.CompactionModel)
		}
	}
	if !seen[c.DefaultModel] {
		names := make([]string, len(c.Models))
		for i, m := range c.Models {
			names[i] = m.Name
		}
		return fmt.Errorf("default_model %q is not among the models (%s)", c.DefaultModel, strings.Join(names, ", "))
	}
	return nil
}

func (l Limits) check() error {
	for _, v := range []struct {
		key      string
		val, min int64
	}{
		{"tool_result_timeout", int64(l.ToolResultTimeout), 1},
		{"max_steps", int64(l.MaxSteps), 1},
		{"max_body_bytes", l.MaxBodyBytes, 1},
		{"max_dynamic_tools", int64(l.MaxDynamicTools), 0},
		{"max_tool_schema_bytes", int64(l.MaxToolSchemaBytes), 1},
		{"max_labels", int64(l.MaxLabels), 0},
		{"max_message_bytes", int64(l.MaxMessageBytes), 1},
	} {
		if v.val < v.min && v.min == 0 {
			return fmt.Errorf("limits.%s must not be negative", v.key)
		}
		if v.val < v.min {
			return fmt.Errorf("limits.%s must be positive", v.key)
		}
	}
	return nil
}

func (l LuaRuntime) check() error {
	if l.CallTimeout <= 0 || l.BatchTimeout <= 0 || l.HTTPTimeout <= 0 || l.MaxResponseBytes <= 0 {
		return errors.New("tools.lua_runtime: call_timeout, batch_timeout, http_timeout and max_response_bytes must be positive")
	}
	if l.CallTimeout > l.BatchTimeout {
		return fmt.Errorf("tools.lua_runtime: call_timeout (%s) must not be longer than batch_timeout (%s)", time.Duration(l.CallTimeout), time.Duration(l.BatchTimeout))
	}
	if l.ReloadInterval < 0 {
		return errors.New("tools.lua_runtime.reload_interval must not be negative (0 turns reloading off)")
	}
	for i, h := range l.HTTPAllowHosts {
		if strings.TrimSpace(h) == "" || strings.Contains(h, "/") {
			return fmt.Errorf("tools.lua_runtime.http_allow_hosts[%d] %q: want a host, host:port or *.domain, without scheme or path", i, h)
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
