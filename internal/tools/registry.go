// Package tools holds parley's server-side tools: the Registry of single Tools
// and Sources, and the Dispatcher that runs the tool calls of one model step
// (docs/architecture.md, "How a chat runs").
package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyhq/parley/tool"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// BuiltinSource is the source name under which single Tools are listed.
const BuiltinSource = "builtin"

// listTimeout bounds one source's Tools call, which must be cheap.
const listTimeout = 5 * time.Second

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Decl is a server-side tool as GET /api/v1/tools and the model see it, with
// its approval as the registry's ApprovalPolicy decides it.
type Decl struct {
	tool.Decl
	Source string `json:"source"` // BuiltinSource for single Tools, else the source's name
	Approval
}

// Approval is whether a tool's calls wait for a person's decision before
// they run, and the policy that decided it (see ApprovalPolicy.Resolve).
type Approval struct {
	Policy   string `json:"approval"`          // never | always | destructive
	Required bool   `json:"requires_approval"` // the policy applied to the tool's annotations
}

// entry is one callable server-side tool with its compiled schema.
//
// An entry is immutable once a catalog holds it: when its approval changes,
// publish replaces it with a copy.
type entry struct {
	decl     tool.Decl
	approval Approval // set by publish from the registry's policy
	schema   *jsonschema.Schema
	tool     tool.Tool    // set for a single Tool
	source   *sourceState // set for a source's tool
}

// sourceState is a registered source and the tool list parley uses for it.
type sourceState struct {
	src     tool.Source
	name    string
	entries []*entry // its last accepted tool list, in declared order
	lastErr string   // the last refresh error, logged once rather than at every step
}

// catalog is an immutable snapshot of every server-side tool.
type catalog struct {
	order  []*entry // single Tools in registration order, then each source's tools
	byName map[string]*entry
}

// Registry holds the server's single Tools and Sources. Names are unique
// across all of them: a clash is an error when a tool or source is added, and
// when a source's tool list changes (the source then keeps its previous list).
// It is safe for concurrent use.
//
// Its ApprovalPolicy (SetApprovalPolicy; never for every tool until set)
// decides which tools need a person's approval; every published tool carries
// its Approval, recomputed whenever a tool list changes.
type Registry struct {
	log *slog.Logger

	mu      sync.Mutex // serialises changes to tools, sources and policy
	tools   []*entry
	sources []*sourceState
	policy  ApprovalPolicy

	cur atomic.Pointer[catalog] // what steps read, without locking
}

// NewRegistry returns an empty registry that logs to log.
func NewRegistry(log *slog.Logger) *Registry {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{log: log}
	r.cur.Store(&catalog{byName: map[string]*entry{}})
	return r
}

// SetApprovalPolicy sets the policy that decides which tools need approval,
// and applies it to every tool already registered. An invalid policy (see
// ApprovalPolicy.Validate) is refused and the previous one stays.
func (r *Registry) SetApprovalPolicy(p ApprovalPolicy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p.Sources = maps.Clone(p.Sources)
	p.Rules = slices.Clone(p.Rules)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.policy = p
	r.publish()
	return nil
}

// AddTool registers a single Tool. Its declaration must be valid and its name
// unused by any other server-side tool.
func (r *Registry) AddTool(t tool.Tool) error {
	e, err := newEntry(t.Decl())
	if err != nil {
		return fmt.Errorf("add tool: %w", err)
	}
	e.tool = t
	r.mu.Lock()
	defer r.mu.Unlock()
	if owner := r.owner(e.decl.Name, nil); owner != "" {
		return fmt.Errorf("add tool %q: the name is already used by %s", e.decl.Name, owner)
	}
	r.tools = append(r.tools, e)
	r.publish()
	return nil
}

// AddSource registers a Source and reads its tool list, which must be valid
// and clash with no other server-side tool. On error the source is not
// registered and the caller still owns it.
func (r *Registry) AddSource(ctx context.Context, src tool.Source) error {
	name := src.Name()
	if name == "" || name == BuiltinSource {
		return fmt.Errorf("add tool source %q: the name must be non-empty and not %q", name, BuiltinSource)
	}
	decls, err := guard(ctx, listTimeout, src.Tools)
	if err != nil {
		return fmt.Errorf("add tool source %q: list tools: %w", name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.sources {
		if s.name == name {
			return fmt.Errorf("add tool source %q: a source of that name is already registered", name)
		}
	}
	s := &sourceState{src: src, name: name}
	entries, err := r.accept(s, decls)
	if err != nil {
		return fmt.Errorf("add tool source %q: %w", name, err)
	}
	s.entries = entries
	r.sources = append(r.sources, s)
	r.publish()
	return nil
}

// Refresh re-reads every source's tool list and adopts the lists that changed.
// A source whose list cannot be read, is invalid or clashes with another tool
// keeps its previous list; Refresh logs and returns those errors. The
// dispatcher refreshes at the start of every step, and so does Decls, so a
// source's Tools must be cheap.
func (r *Registry) Refresh(ctx context.Context) error {
	// One refresh at a time, so an older read never replaces a newer list.
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	changed := false
	for _, s := range r.sources {
		ok, err := r.refreshSource(ctx, s)
		changed = changed || ok
		if err != nil {
			errs = append(errs, err)
		}
		switch {
		case err == nil:
			s.lastErr = ""
		case ctx.Err() != nil:
			// the caller gave up (an interrupt, a shutdown): nothing to report
		case err.Error() != s.lastErr:
			s.lastErr = err.Error()
			r.log.Error("refresh tool source", "source", s.name, "err", err)
		}
	}
	if changed {
		r.publish()
	}
	return errors.Join(errs...)
}

// refreshSource re-reads one source's list and reports whether it adopted a
// changed one. r.mu must be held.
func (r *Registry) refreshSource(ctx context.Context, s *sourceState) (bool, error) {
	decls, err := guard(ctx, listTimeout, s.src.Tools)
	if err != nil {
		return false, fmt.Errorf("tool source %q: list tools: %w", s.name, err)
	}
	if sameDecls(s.entries, decls) {
		return false, nil
	}
	entries, err := r.accept(s, decls)
	if err != nil {
		return false, fmt.Errorf("tool source %q: new tool list refused, keeping the previous one: %w", s.name, err)
	}
	s.entries = entries
	return true, nil
}

// Decls refreshes the sources' lists (see Refresh; errors are logged once) and
// returns every server-side tool: single Tools in registration order, then
// each source's tools in the order it declares them.
func (r *Registry) Decls(ctx context.Context) []Decl {
	_ = r.Refresh(ctx)
	return r.snapshot().decls()
}

// SourceInfo is a registered source as GET /api/v1/tools shows it: its
// state, the last error (of the source, or a refused tool list), and how many
// tools it offers now.
type SourceInfo struct {
	Name string `json:"name"`
	tool.Status
	Tools int `json:"tools"`
}

// Sources lists the registered sources in registration order. A source that
// does not report a state (tool.StatusReporter) is ready.
func (r *Registry) Sources() []SourceInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]SourceInfo, len(r.sources))
	for i, s := range r.sources {
		st := tool.Status{State: tool.StateReady}
		if sr, ok := s.src.(tool.StatusReporter); ok {
			st = sr.Status()
		}
		if st.Error == "" {
			st.Error = s.lastErr
		}
		out[i] = SourceInfo{Name: s.name, Status: st, Tools: len(s.entries)}
	}
	return out
}

// Has reports whether name is a server-side tool, as of the last refresh.
func (r *Registry) Has(name string) bool {
	_, ok := r.snapshot().byName[name]
	return ok
}

// RequiresApproval reports whether the server-side tool name needs a
// person's approval before a call runs, as of the last refresh; false for a
// name that is not a server-side tool.
func (r *Registry) RequiresApproval(name string) bool {
	e, ok := r.snapshot().byName[name]
	return ok && e.approval.Required
}

// Close closes every source and returns their errors.
func (r *Registry) Close() error {
	r.mu.Lock()
	sources := slices.Clone(r.sources)
	r.mu.Unlock()
	var errs []error
	for _, s := range sources {
		if err := s.src.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close tool source %q: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}

// snapshot returns the current catalog.
func (r *Registry) snapshot() *catalog { return r.cur.Load() }

func (c *catalog) decls() []Decl {
	out := make([]Decl, len(c.order))
	for i, e := range c.order {
		out[i] = Decl{Decl: e.decl, Source: e.sourceName(), Approval: e.approval}
	}
	return out
}

func (e *entry) sourceName() string {
	if e.source != nil {
		return e.source.name
	}
	return BuiltinSource
}

// accept validates a source's new tool list against itself and every other
// server-side tool, and compiles it, reusing the compiled schemas of
// declarations that did not change. r.mu must be held.
func (r *Registry) accept(s *sourceState, decls []tool.Decl) ([]*entry, error) {
	old := map[string]*entry{}
	for _, e := range s.entries {
		old[e.decl.Name] = e
	}
	entries := make([]*entry, 0, len(decls))
	seen := map[string]bool{}
	for _, d := range decls {
		if seen[d.Name] {
			return nil, fmt.Errorf("tool %q is declared twice", d.Name)
		}
		seen[d.Name] = true
		if owner := r.owner(d.Name, s); owner != "" {
			return nil, fmt.Errorf("tool %q: the name is already used by %s", d.Name, owner)
		}
		if e, ok := old[d.Name]; ok && sameDecl(e.decl, d) {
			entries = append(entries, e)
			continue
		}
		e, err := newEntry(d)
		if err != nil {
			return nil, err
		}
		e.source = s
		entries = append(entries, e)
	}
	return entries, nil
}

// owner names who already uses a tool name, ignoring the source except, or
// returns "" when the name is free. r.mu must be held.
func (r *Registry) owner(name string, except *sourceState) string {
	for _, e := range r.tools {
		if e.decl.Name == name {
			return "a built-in tool"
		}
	}
	for _, s := range r.sources {
		if s == except {
			continue
		}
		for _, e := range s.entries {
			if e.decl.Name == name {
				return fmt.Sprintf("tool source %q", s.name)
			}
		}
	}
	return ""
}

// publish installs a new catalog built from the current tools and sources,
// each with its approval under the current policy. r.mu must be held.
func (r *Registry) publish() {
	for i, e := range r.tools {
		r.tools[i] = r.withApproval(e)
	}
	for _, s := range r.sources {
		for i, e := range s.entries {
			s.entries[i] = r.withApproval(e)
		}
	}
	c := &catalog{byName: map[string]*entry{}}
	c.order = append(c.order, r.tools...)
	for _, s := range r.sources {
		c.order = append(c.order, s.entries...)
	}
	for _, e := range c.order {
		c.byName[e.decl.Name] = e
	}
	r.cur.Store(c)
}

// withApproval returns e if its approval is the one the policy gives it, else
// a copy with that approval: a published entry is never changed, since steps
// read it without locking. r.mu must be held.
func (r *Registry) withApproval(e *entry) *entry {
	a := r.policy.Resolve(e.decl.Name, e.sourceName(), e.decl.Annotations)
	if a == e.approval {
		return e
	}
	cp := *e
	cp.approval = a
	return &cp
}

// newEntry validates a declaration and compiles its schema.
func newEntry(d tool.Decl) (*entry, error) {
	if !toolNameRE.MatchString(d.Name) {
		return nil, fmt.Errorf("tool name %q must match %s", d.Name, toolNameRE)
	}
	if len(bytes.TrimSpace(d.InputSchema)) == 0 {
		d.InputSchema = emptySchema
	}
	sch, err := compileSchema(d.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", d.Name, err)
	}
	d.InputSchema = slices.Clone(d.InputSchema) // the caller may reuse its buffer
	d.Annotations = d.Annotations.Clone()
	return &entry{decl: d, schema: sch}, nil
}

// sameDecls reports whether a source's accepted entries match a new list.
func sameDecls(entries []*entry, decls []tool.Decl) bool {
	if len(entries) != len(decls) {
		return false
	}
	for i, e := range entries {
		if !sameDecl(e.decl, decls[i]) {
			return false
		}
	}
	return true
}

func sameDecl(a, b tool.Decl) bool {
	if len(bytes.TrimSpace(b.InputSchema)) == 0 {
		b.InputSchema = emptySchema
	}
	return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema) &&
		a.Annotations.Equal(b.Annotations)
}
