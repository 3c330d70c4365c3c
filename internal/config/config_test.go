package config

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// env is a fake environment for Load's getenv.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// writeConfig writes a YAML config file in a temp dir and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	cfg, err := Load(Overrides{}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8080" {
		t.Errorf("listen = %q", cfg.Listen)
	}
	if cfg.DataDir != "./parley-data" {
		t.Errorf("data dir = %q", cfg.DataDir)
	}
	if cfg.Database != "sqlite://parley-data/parley.db" {
		t.Errorf("database = %q", cfg.Database)
	}
	if len(cfg.Models) != 1 || cfg.Models[0].Provider != "echo" || cfg.DefaultModel != cfg.Models[0].Name {
		t.Errorf("models = %+v, default %q; want the echo model alone, as default", cfg.Models, cfg.DefaultModel)
	}
	if time.Duration(cfg.Limits.ToolResultTimeout) != 10*time.Minute || cfg.Limits.MaxSteps != 50 {
		t.Errorf("limits = %+v", cfg.Limits)
	}
	if cfg.SlogLevel() != slog.LevelInfo {
		t.Errorf("log level = %v", cfg.SlogLevel())
	}
	if cfg.Tools.MaxResultBytes != 64<<10 {
		t.Errorf("tools.max_result_bytes = %d, want 64 KiB", cfg.Tools.MaxResultBytes)
	}
}

func TestDatabaseDefaultFollowsDataDir(t *testing.T) {
	cfg, err := Load(Overrides{DataDir: "/var/lib/parley"}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database != "sqlite:///var/lib/parley/parley.db" {
		t.Errorf("database = %q", cfg.Database)
	}
	kind, path, err := Backend(cfg.Database)
	if err != nil || kind != "sqlite" || path != "/var/lib/parley/parley.db" {
		t.Errorf("Backend = %q, %q, %v", kind, path, err)
	}
}

// TestPrecedence checks flag > env > file > default for each setting that
// has all four sources.
func TestPrecedence(t *testing.T) {
	file := writeConfig(t, `
listen: file:1
data_dir: /file
database: sqlite:///file.db
log_level: warn
`)
	fullEnv := env{
		"PARLEY_LISTEN":       "env:2",
		"PARLEY_DATA_DIR":     "/env",
		"PARLEY_DATABASE_URL": "postgres://env/db",
		"PARLEY_LOG_LEVEL":    "error",
	}
	flags := Overrides{Listen: "flag:3", DataDir: "/flag", Database: "sqlite:///flag.db", LogLevel: "debug"}

	type got struct{ listen, dataDir, database, logLevel string }
	cases := []struct {
		name  string
		flags Overrides
		env   env
		file  bool
		want  got
	}{
		{"default", Overrides{}, env{}, false, got{"127.0.0.1:8080", "./parley-data", "sqlite://parley-data/parley.db", "info"}},
		{"file over default", Overrides{}, env{}, true, got{"file:1", "/file", "sqlite:///file.db", "warn"}},
		{"env over file", Overrides{}, fullEnv, true, got{"env:2", "/env", "postgres://env/db", "error"}},
		{"flag over env", flags, fullEnv, true, got{"flag:3", "/flag", "sqlite:///flag.db", "debug"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fl := c.flags
			if c.file {
				fl.ConfigFile = file
			}
			cfg, err := Load(fl, c.env.get)
			if err != nil {
				t.Fatal(err)
			}
			g := got{cfg.Listen, cfg.DataDir, cfg.Database, cfg.LogLevel}
			if g != c.want {
				t.Errorf("got %+v, want %+v", g, c.want)
			}
		})
	}
}

func TestConfigFileFromEnvAndFlag(t *testing.T) {
	fromEnv := writeConfig(t, "listen: envfile:1\n")
	fromFlag := writeConfig(t, "listen: flagfile:1\n")
	cfg, err := Load(Overrides{}, env{"PARLEY_CONFIG": fromEnv}.get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "envfile:1" {
		t.Errorf("PARLEY_CONFIG: listen = %q", cfg.Listen)
	}
	cfg, err = Load(Overrides{ConfigFile: fromFlag}, env{"PARLEY_CONFIG": fromEnv}.get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "flagfile:1" {
		t.Errorf("--config over PARLEY_CONFIG: listen = %q", cfg.Listen)
	}
}

// TestDataDirFlagKeepsFileDatabase: a database set in the file is not
// replaced by the default derived from a data dir given later.
func TestDataDirFlagKeepsFileDatabase(t *testing.T) {
	file := writeConfig(t, "database: postgres://db.example/parley\n")
	cfg, err := Load(Overrides{ConfigFile: file, DataDir: "/elsewhere"}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database != "postgres://db.example/parley" {
		t.Errorf("database = %q", cfg.Database)
	}
}

func TestFullFile(t *testing.T) {
	file := writeConfig(t, `
listen: 0.0.0.0:9000
database: postgres://parley@127.0.0.1:5432/parley
default_model: smart
models:
  - name: fast
    provider: openai
    model: gpt-5-mini
    api_key_env: OPENAI_API_KEY
    price: {input_per_mtok: 0.25, output_per_mtok: 2.0}
  - name: smart
    provider: anthropic
    model: claude-sonnet-4-5
  - name: local
    provider: openai
    model: llama3.2
    base_url: http://127.0.0.1:11434/v1
  - name: try
    provider: echo
tools:
  lua:
    - name: weather
      path: ./tools/weather.lua
  max_result_bytes: 131072
limits:
  tool_result_timeout: 90s
  max_steps: 7
  max_body_bytes: 2048
`)
	cfg, err := Load(Overrides{ConfigFile: file}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Models) != 4 || cfg.DefaultModel != "smart" {
		t.Fatalf("models = %+v, default %q", cfg.Models, cfg.DefaultModel)
	}
	m, ok := cfg.FindModel("fast")
	if !ok || m.Price == nil || m.Price.OutputPerMTok != 2.0 || m.APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("fast = %+v (price %+v)", m, m.Price)
	}
	if _, ok := cfg.FindModel("echo"); ok {
		t.Error("the implicit echo model is added only when no model is configured")
	}
	if len(cfg.Tools.Lua) != 1 || cfg.Tools.Lua[0].Path != "./tools/weather.lua" || cfg.Tools.MaxResultBytes != 131072 {
		t.Errorf("tools = %+v", cfg.Tools)
	}
	l := cfg.Limits
	if time.Duration(l.ToolResultTimeout) != 90*time.Second || l.MaxSteps != 7 || l.MaxBodyBytes != 2048 {
		t.Errorf("limits = %+v", l)
	}
	if l.MaxLabels != Default().Limits.MaxLabels {
		t.Errorf("unset limit max_labels = %d, want the default", l.MaxLabels)
	}
	if got := l.Chat().MaxLabels; got != l.MaxLabels {
		t.Errorf("Chat().MaxLabels = %d", got)
	}
}

func TestDefaultModelIsFirstConfigured(t *testing.T) {
	file := writeConfig(t, "models:\n  - {name: a, provider: openai, model: x}\n  - {name: b, provider: echo}\n")
	cfg, err := Load(Overrides{ConfigFile: file}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DefaultModel != "a" {
		t.Errorf("default model = %q, want the first one", cfg.DefaultModel)
	}
}

func TestEmptyAndCommentOnlyFiles(t *testing.T) {
	for _, text := range []string{"", "# nothing here\n"} {
		cfg, err := Load(Overrides{ConfigFile: writeConfig(t, text)}, env{}.get)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if cfg.Listen != "127.0.0.1:8080" {
			t.Errorf("%q: listen = %q", text, cfg.Listen)
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		env  env
		want []string // substrings of the error
	}{
		{"bad yaml", "listen: [unclosed\n", nil, []string{"parley.yaml", "line"}},
		{"unknown key", "listen: 127.0.0.1:1\nlisten_addr: x\n", nil, []string{"listen_addr", "line 2"}},
		{"unknown nested key", "limits:\n  max_stepz: 3\n", nil, []string{"max_stepz"}},
		{"bad duration", "limits:\n  tool_result_timeout: ten minutes\n", nil, []string{"line 2", "ten minutes", "not a duration"}},
		{"duration without unit", "limits:\n  tool_result_timeout: 600\n", nil, []string{"600", "not a duration"}},
		{"unknown provider", "models:\n  - {name: a, provider: gemini, model: x}\n", nil, []string{"models[0]", "gemini", "openai-responses"}},
		{"unknown default_model", "default_model: nope\nmodels:\n  - {name: a, provider: echo}\n", nil, []string{"default_model", "nope"}},
		{"default_model without models", "default_model: nope\n", nil, []string{"default_model", "nope"}},
		{"duplicate model", "models:\n  - {name: a, provider: echo}\n  - {name: a, provider: echo}\n", nil, []string{"models[1]", "twice"}},
		{"model without name", "models:\n  - {provider: echo}\n", nil, []string{"models[0]", "name"}},
		{"model without model id", "models:\n  - {name: a, provider: openai}\n", nil, []string{"models[0]", "model"}},
		{"bad base_url", "models:\n  - {name: a, provider: openai, model: x, base_url: 'localhost:11434'}\n", nil, []string{"base_url"}},
		{"negative price", "models:\n  - {name: a, provider: openai, model: x, price: {input_per_mtok: -1}}\n", nil, []string{"price"}},
		{"zero limit", "limits:\n  max_steps: 0\n", nil, []string{"limits.max_steps"}},
		{"negative limit", "limits:\n  max_labels: -1\n", nil, []string{"limits.max_labels"}},
		{"lua without path", "tools:\n  lua:\n    - name: w\n", nil, []string{"tools.lua[0]"}},
		{"zero max_result_bytes", "tools:\n  max_result_bytes: 0\n", nil, []string{"line 2", "tools.max_result_bytes", "from 1 to 8388608"}},
		{"negative max_result_bytes", "tools:\n  max_result_bytes: -1\n", nil, []string{"line 2", "tools.max_result_bytes"}},
		{"max_result_bytes over 8 MiB", "tools:\n  max_result_bytes: 8388609\n", nil, []string{"line 2", "tools.max_result_bytes", "8388609"}},
		{"duplicate lua source", "tools:\n  lua:\n    - {name: w, path: a}\n    - {name: w, path: b}\n", nil, []string{"tools.lua[1]", "twice"}},
		{"bad database", "database: mysql://x\n", nil, []string{"mysql://x", "sqlite://"}},
		{"sqlite without path", "database: 'sqlite://'\n", nil, []string{"no path"}},
		{"bad listen", "listen: 8080\n", nil, []string{"listen", "HOST:PORT"}},
		{"empty data_dir", "data_dir: ''\n", nil, []string{"data_dir"}},
		{"bad log level", "", env{"PARLEY_LOG_LEVEL": "loud"}, []string{"log_level", "loud"}},
		{"bad env database", "", env{"PARLEY_DATABASE_URL": "postgre://x"}, []string{"postgre://x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(Overrides{ConfigFile: writeConfig(t, c.yaml)}, c.env.get)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestMissingConfigFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	if _, err := Load(Overrides{ConfigFile: missing}, env{}.get); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("missing --config file: err = %v", err)
	}
	if _, err := Load(Overrides{}, env{"PARLEY_CONFIG": missing}.get); err == nil {
		t.Error("missing PARLEY_CONFIG file: no error")
	}
}

func TestBackend(t *testing.T) {
	cases := []struct{ url, kind, dsn string }{
		{"sqlite://parley-data/parley.db", "sqlite", "parley-data/parley.db"},
		{"sqlite:///abs/p.db", "sqlite", "/abs/p.db"},
		{"postgres://u@h:5432/d?sslmode=disable", "postgres", "postgres://u@h:5432/d?sslmode=disable"},
		{"postgresql://u@h/d", "postgres", "postgresql://u@h/d"},
	}
	for _, c := range cases {
		kind, dsn, err := Backend(c.url)
		if err != nil || kind != c.kind || dsn != c.dsn {
			t.Errorf("Backend(%q) = %q, %q, %v; want %q, %q", c.url, kind, dsn, err, c.kind, c.dsn)
		}
	}
	for _, bad := range []string{"", "parley.db", "file:parley.db", "sqlite://", "mysql://h/d"} {
		if _, _, err := Backend(bad); err == nil {
			t.Errorf("Backend(%q): no error", bad)
		}
	}
}

// TestDocumentedExample loads the complete example of docs/configuration.md,
// so the documentation cannot drift from what Load accepts.
func TestDocumentedExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## A complete example")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## A complete example" section`)
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	yaml, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the example section has no ```yaml block")
	}
	cfg, err := Load(Overrides{ConfigFile: writeConfig(t, yaml)}, env{"GITHUB_MCP_TOKEN": "secret"}.get)
	if err != nil {
		t.Fatalf("the documented example does not load: %v", err)
	}
	if len(cfg.Models) != 5 || len(cfg.Tools.Lua) != 2 || len(cfg.Tools.MCP) != 2 || cfg.DefaultModel != "fast" {
		t.Errorf("documented example: %d models, %d Lua sources, %d MCP servers, default %q", len(cfg.Models), len(cfg.Tools.Lua), len(cfg.Tools.MCP), cfg.DefaultModel)
	}
	var providers []string
	for _, m := range cfg.Models {
		providers = append(providers, m.Provider)
	}
	for _, p := range Providers {
		if !slices.Contains(providers, p) {
			t.Errorf("the documented example has no model of provider %q", p)
		}
	}
}

// TestEchoModelID: an echo model configured without `model:` has the id
// "echo", as GET /api/v1/models shows it.
func TestEchoModelID(t *testing.T) {
	file := writeConfig(t, "models:\n  - {name: offline, provider: echo}\n")
	cfg, err := Load(Overrides{ConfigFile: file}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Models[0].Model; got != "echo" {
		t.Errorf("echo model id = %q, want echo", got)
	}
}

func TestMCPServers(t *testing.T) {
	file := writeConfig(t, `
tools:
  lua:
    - {name: weather, path: ./w.lua}
  mcp:
    - name: github
      url: https://mcp.example.com/mcp
      bearer_token_env: GH_TOKEN
      headers_env: {X-Tenant: GH_TENANT}
      deny: ["delete_*"]
    - name: files
      command: ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
      env: {NODE_OPTIONS: "--max-old-space-size=256"}
      max_concurrency: 8
      call_timeout: 10m # longer than the dispatcher's default batch bound: a step waits for it
`)
	cfg, err := Load(Overrides{ConfigFile: file}, env{"GH_TOKEN": "t0k", "GH_TENANT": "acme"}.get)
	if err != nil {
		t.Fatal(err)
	}
	gh, files := cfg.Tools.MCP[0], cfg.Tools.MCP[1]
	if gh.BearerToken != "t0k" || gh.Headers["X-Tenant"] != "acme" || gh.MaxConcurrency != 0 || gh.CallTimeout != 0 {
		t.Errorf("github = %+v", gh)
	}
	if files.Command[0] != "npx" || files.Env["NODE_OPTIONS"] == "" || files.MaxConcurrency != 8 || time.Duration(files.CallTimeout) != 10*time.Minute {
		t.Errorf("files = %+v", files)
	}

	bad := []struct {
		name, yaml string
		env        env
		want       []string
	}{
		{"neither", "tools:\n  mcp:\n    - {name: a}\n", nil, []string{"tools.mcp[0] (a)", "command", "url"}},
		{"both", "tools:\n  mcp:\n    - {name: a, url: 'http://h/mcp', command: [x]}\n", nil, []string{"not both"}},
		{"bad name", "tools:\n  mcp:\n    - {name: 'my server', command: [x]}\n", nil, []string{"tools.mcp[0]", "my server"}},
		{"name of a Lua source", "tools:\n  lua:\n    - {name: a, path: x}\n  mcp:\n    - {name: a, command: [x]}\n", nil, []string{"tools.mcp[0] (a)", "already used"}},
		{"twice", "tools:\n  mcp:\n    - {name: a, command: [x]}\n    - {name: a, command: [y]}\n", nil, []string{"tools.mcp[1] (a)", "already used"}},
		{"bad url", "tools:\n  mcp:\n    - {name: a, url: 'localhost:3001'}\n", nil, []string{"url", "localhost:3001"}},
		{"unset token", "tools:\n  mcp:\n    - {name: a, url: 'http://h/mcp', bearer_token_env: NOPE}\n", nil, []string{"NOPE", "not set"}},
		{"unset header", "tools:\n  mcp:\n    - {name: a, url: 'http://h/mcp', headers_env: {X-K: NOPE}}\n", nil, []string{"X-K", "NOPE"}},
		{"bad glob", "tools:\n  mcp:\n    - {name: a, command: [x], deny: ['[']}\n", nil, []string{"glob", "["}},
		{"env on http", "tools:\n  mcp:\n    - {name: a, url: 'http://h/mcp', env: {A: b}}\n", nil, []string{"command servers only"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(Overrides{ConfigFile: writeConfig(t, c.yaml)}, c.env.get)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// secretsSet is an environment where every variable but parley's own
// (PARLEY_*) is set.
func secretsSet(name string) string {
	if strings.HasPrefix(name, "PARLEY_") {
		return ""
	}
	return "set"
}

// TestEveryYAMLExampleInTheDocsLoads loads each ```yaml block of the docs as
// a configuration file, so no example shows a key or value Load refuses.
// Every environment variable an example names is taken as set; a block that
// says it is for Kubernetes is not a parley configuration.
func TestEveryYAMLExampleInTheDocsLoads(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	examples := 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rest := string(raw)
		for n := 1; ; n++ {
			_, after, ok := strings.Cut(rest, "```yaml\n")
			if !ok {
				break
			}
			block, tail, _ := strings.Cut(after, "```")
			rest = tail
			if strings.HasPrefix(block, "# Kubernetes") {
				continue
			}
			examples++
			if _, err := Load(Overrides{ConfigFile: writeConfig(t, block)}, secretsSet); err != nil {
				t.Errorf("%s, yaml example %d does not load: %v", filepath.Base(doc), n, err)
			}
		}
	}
	if examples < 4 {
		t.Fatalf("found %d yaml examples in docs/, want at least 4", examples)
	}
}

func TestStructuredOutputMaxRepairs(t *testing.T) {
	cfg, err := Load(Overrides{}, env{}.get)
	if err != nil || cfg.StructuredOutput.MaxRepairs != 2 {
		t.Fatalf("default max_repairs = %+v, %v; want 2", cfg.StructuredOutput, err)
	}
	cfg, err = Load(Overrides{ConfigFile: writeConfig(t, "structured_output:\n  max_repairs: 0\n")}, env{}.get)
	if err != nil || cfg.StructuredOutput.MaxRepairs != 0 {
		t.Fatalf("max_repairs: 0 = %+v, %v; want 0 (no repairs)", cfg.StructuredOutput, err)
	}
	_, err = Load(Overrides{ConfigFile: writeConfig(t, "structured_output:\n  max_repairs: -1\n")}, env{}.get)
	if err == nil || !strings.Contains(err.Error(), "structured_output.max_repairs") {
		t.Fatalf("max_repairs: -1 = %v; want an error naming it", err)
	}
}
