package config

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
)

// MCPServer is one MCP server whose tools parley offers (docs/mcp.md):
// a command run over stdio, or a streamable HTTP URL. Secrets are never
// written in the file: headers and the bearer token name environment
// variables, which Load reads once.
type MCPServer struct {
	Name           string            `yaml:"name"`
	Command        []string          `yaml:"command"`  // program and arguments
	Env            map[string]string `yaml:"env"`      // set in the child's environment
	PassEnv        []string          `yaml:"pass_env"` // parley's variables passed to the child, besides the basic ones
	Dir            string            `yaml:"dir"`      // the child's working directory
	URL            string            `yaml:"url"`
	HeadersEnv     map[string]string `yaml:"headers_env"` // header name -> variable holding its value
	BearerTokenEnv string            `yaml:"bearer_token_env"`
	Allow          []string          `yaml:"allow"` // globs over the server's tool names; none: all
	Deny           []string          `yaml:"deny"`
	// Zero takes the MCP source's default (docs/mcp.md).
	MaxConcurrency int      `yaml:"max_concurrency"` // calls of one step in flight at once
	CallTimeout    Duration `yaml:"call_timeout"`
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// FirstConnectTimeout bounds a stdio server's first connection attempt,
	// which may download a package.
	FirstConnectTimeout Duration `yaml:"first_connect_timeout"`
	// Approval is the approval policy of the server's tools (never when
	// empty) unless a tools.approval rule matches.
	Approval string `yaml:"approval"`

	// Read from the environment by Load.
	Headers     map[string]string `yaml:"-"`
	BearerToken string            `yaml:"-"`
	ChildEnv    map[string]string `yaml:"-"` // stdio: the child's whole environment
}

// childBaseEnv are the variables of parley's environment every stdio MCP
// server gets, so a program finds its tools and its home; anything else
// (an API key the server needs) is named in pass_env or set in env. parley's
// own secrets (provider keys, the database URL) are never passed otherwise.
var childBaseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TZ"}

// sourceNameRE is what a tool source's name may be: it prefixes tool names.
var sourceNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// resolveMCP fills in defaults and the values of the named environment
// variables, and checks each server; names must differ from each other and
// from the Lua sources'.
func (c *Config) resolveMCP(getenv func(string) string) error {
	names := map[string]bool{}
	for _, s := range c.Tools.Lua {
		names[s.Name] = true
	}
	for i := range c.Tools.MCP {
		s := &c.Tools.MCP[i]
		at := fmt.Sprintf("tools.mcp[%d]", i)
		if s.Name != "" {
			at += " (" + s.Name + ")"
		}
		if err := s.resolve(getenv); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		if names[s.Name] {
			return fmt.Errorf("%s: the name is already used by another tool source", at)
		}
		names[s.Name] = true
	}
	return nil
}

func (s *MCPServer) resolve(getenv func(string) string) error {
	if !sourceNameRE.MatchString(s.Name) {
		return fmt.Errorf("name %q must match %s (it prefixes the tools' names)", s.Name, sourceNameRE)
	}
	switch {
	case len(s.Command) > 0 && s.URL != "":
		return fmt.Errorf("set command (stdio) or url (streamable HTTP), not both")
	case len(s.Command) > 0:
		if s.Command[0] == "" {
			return fmt.Errorf("command: the program is empty")
		}
		if len(s.HeadersEnv) > 0 || s.BearerTokenEnv != "" {
			return fmt.Errorf("headers_env and bearer_token_env apply to url servers only")
		}
	case s.URL != "":
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url %q is not an http(s) URL", s.URL)
		}
		if len(s.Env) > 0 || s.Dir != "" {
			return fmt.Errorf("env and dir apply to command servers only")
		}
	default:
		return fmt.Errorf("command (stdio) or url (streamable HTTP) is required")
	}
	if len(s.Command) > 0 {
		s.ChildEnv = map[string]string{}
		for _, name := range childBaseEnv {
			if v := getenv(name); v != "" {
				s.ChildEnv[name] = v
			}
		}
		for _, name := range s.PassEnv {
			v := getenv(name)
			if v == "" {
				return fmt.Errorf("pass_env: the environment variable %s is not set", name)
			}
			s.ChildEnv[name] = v
		}
		for k, v := range s.Env {
			s.ChildEnv[k] = v
		}
	} else if len(s.PassEnv) > 0 {
		return fmt.Errorf("pass_env applies to command servers only")
	}
	for _, g := range append(append([]string{}, s.Allow...), s.Deny...) {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return fmt.Errorf("allow/deny glob %q is malformed (want a pattern like \"search_*\")", g)
		}
	}
	if s.MaxConcurrency < 0 || s.CallTimeout < 0 || s.ConnectTimeout < 0 || s.FirstConnectTimeout < 0 {
		return fmt.Errorf("max_concurrency, call_timeout, connect_timeout and first_connect_timeout must not be negative")
	}
	if s.FirstConnectTimeout != 0 && s.URL != "" {
		return fmt.Errorf("first_connect_timeout applies to command servers only")
	}
	if err := checkApproval(s.Approval, true); err != nil {
		return err
	}
	if s.BearerTokenEnv != "" {
		if s.BearerToken = getenv(s.BearerTokenEnv); s.BearerToken == "" {
			return fmt.Errorf("bearer_token_env: the environment variable %s is not set", s.BearerTokenEnv)
		}
	}
	s.Headers = map[string]string{}
	for h, env := range s.HeadersEnv {
		if s.Headers[h] = getenv(env); s.Headers[h] == "" {
			return fmt.Errorf("headers_env %s: the environment variable %s is not set", h, env)
		}
	}
	return nil
}
