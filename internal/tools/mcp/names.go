package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"path"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/tool"
)

// maxNameLen is the longest tool name every provider accepts.
const maxNameLen = 64

// hashLen is how many hex digits of the MCP name's SHA-256 a shortened or
// disambiguated tool name ends with.
const hashLen = 8

// toolEntry is one MCP tool as parley offers it.
type toolEntry struct {
	decl        tool.Decl
	mcpName     string               // the name the server knows it by
	annotations *mcp.ToolAnnotations // nil when the server gave none
}

// catalog is an immutable snapshot of a server's tools.
type catalog struct {
	decls  []tool.Decl // in the server's order
	byName map[string]*toolEntry
}

var emptyCatalog = &catalog{byName: map[string]*toolEntry{}}

// buildCatalog turns a server's tool list into what the model sees: the
// tools Allow and Deny let through, named "<server>_<tool>" (see toolNames),
// each declared with its MCP annotations (see annotations).
// A tool whose input schema parley could not use is left out and logged, so
// that one odd tool does not cost the server its whole list.
func buildCatalog(server string, tools []*mcp.Tool, allow, deny []string, log *slog.Logger) *catalog {
	var kept []*mcp.Tool
	var schemas []json.RawMessage
	for _, t := range tools {
		if !allowed(t.Name, allow, deny) {
			continue
		}
		schema, err := inputSchema(t)
		if err != nil {
			log.Warn("mcp tool left out", "tool", t.Name, "err", err)
			continue
		}
		kept = append(kept, t)
		schemas = append(schemas, schema)
	}
	mcpNames := make([]string, len(kept))
	for i, t := range kept {
		mcpNames[i] = t.Name
	}
	names := toolNames(server, mcpNames)
	c := &catalog{byName: make(map[string]*toolEntry, len(kept))}
	for i, t := range kept {
		name := names[i]
		if name == "" {
			log.Warn("mcp tool left out: its name clashes with another tool's", "tool", t.Name)
			continue
		}
		e := &toolEntry{
			decl:        tool.Decl{Name: name, Description: description(t), InputSchema: schemas[i], Annotations: annotations(t.Annotations)},
			mcpName:     t.Name,
			annotations: t.Annotations,
		}
		c.decls = append(c.decls, e.decl)
		c.byName[name] = e
	}
	return c
}

// toolNames names a server's tools for the model: "<server>_<tool>" with
// every character outside [a-zA-Z0-9_-] replaced by "_". A name longer than
// 64 characters, or one that an altered tool name shares with another tool,
// is cut and given "_" and the first 8 hex digits of the SHA-256 of the MCP
// name, so the same MCP tool always gets the same name. A tool whose name
// needed no change keeps the plain form even when another tool's altered
// name would match it. In the unlikely case that names still clash, the
// later tools get "" (they are left out).
func toolNames(server string, mcpNames []string) []string {
	plain := make([]string, len(mcpNames))
	count := map[string]int{}
	for i, n := range mcpNames {
		plain[i] = sanitize(server + "_" + n)
		count[plain[i]]++
	}
	out := make([]string, len(mcpNames))
	for i, n := range mcpNames {
		unchanged := sanitize(n) == n
		switch {
		case len(plain[i]) > maxNameLen:
			out[i] = hashedName(plain[i], n)
		case count[plain[i]] > 1 && !unchanged:
			out[i] = hashedName(plain[i], n)
		default:
			out[i] = plain[i]
		}
	}
	seen := map[string]bool{}
	for i, n := range out {
		if seen[n] {
			out[i] = ""
			continue
		}
		seen[n] = true
	}
	return out
}

// sanitize replaces every character a tool name may not have with "_".
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// hashedName cuts a sanitised name so that "_" and the hash of the MCP
// name fit in 64 characters, and appends them.
func hashedName(plain, mcpName string) string {
	sum := sha256.Sum256([]byte(mcpName))
	if limit := maxNameLen - 1 - hashLen; len(plain) > limit {
		plain = plain[:limit] // plain is ASCII: no character is split
	}
	return plain + "_" + hex.EncodeToString(sum[:])[:hashLen]
}

// allowed reports whether an MCP tool name passes the Allow and Deny globs
// (path.Match syntax): an empty allow list allows every name, and a deny
// match wins. The patterns were checked by Config.Validate.
func allowed(name string, allow, deny []string) bool {
	for _, p := range deny {
		if ok, _ := path.Match(p, name); ok {
			return false
		}
	}
	if len(allow) == 0 {
		return true
	}
	for _, p := range allow {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// inputSchema returns a tool's input schema as JSON, after checking that
// parley can use it: it must describe an object and compile.
func inputSchema(t *mcp.Tool) (json.RawMessage, error) {
	raw, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("encode input schema: %w", err)
	}
	if bytes.Equal(raw, []byte("null")) {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decode input schema: %w", err)
	}
	if obj, ok := doc.(map[string]any); !ok || obj["type"] != "object" {
		return nil, fmt.Errorf(`input schema must describe an object ("type": "object")`)
	}
	if _, err := chat.CompileSchema(doc); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return raw, nil
}

// description is what the model reads about a tool: its description, or
// its title when it has none.
func description(t *mcp.Tool) string {
	switch {
	case t.Description != "":
		return t.Description
	case t.Title != "":
		return t.Title
	case t.Annotations != nil:
		return t.Annotations.Title
	}
	return ""
}

// annotations are an MCP tool's hints as parley declares them, or nil when
// the server gave none. The SDK has readOnlyHint and idempotentHint as plain
// booleans, so false cannot be told from absent there; as MCP defines both
// as false when absent, they are declared only when true. destructiveHint
// and openWorldHint are kept as given. The title is not a hint: it is the
// description when the tool has none.
func annotations(a *mcp.ToolAnnotations) *tool.Annotations {
	if a == nil {
		return nil
	}
	out := &tool.Annotations{}
	if a.ReadOnlyHint {
		out.ReadOnlyHint = new(true)
	}
	if a.IdempotentHint {
		out.IdempotentHint = new(true)
	}
	if a.DestructiveHint != nil {
		out.DestructiveHint = new(*a.DestructiveHint)
	}
	if a.OpenWorldHint != nil {
		out.OpenWorldHint = new(*a.OpenWorldHint)
	}
	if *out == (tool.Annotations{}) {
		return nil // a title alone
	}
	return out
}
