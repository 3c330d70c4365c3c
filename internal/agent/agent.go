// Package agent is a chat's configuration stored once under a name: the
// model, system prompt, tools, approvals and output schema every chat made
// from it starts with. Each change of an agent is a new immutable version,
// so a chat keeps running on the version it took until it is moved.
//
// Agents are their own package, beside the chat domain rather than in it,
// because they are a definition chats are made from, not part of a chat:
// the chat only names the agent and version it came from.
package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/chat"
)

// Where an agent was defined.
const (
	SourceAPI    = "api"    // an owner wrote it through the API
	SourceConfig = "config" // the configuration file: every owner sees it, nobody changes it
)

// Bounds of an agent's fields (the others are the chat limits').
const (
	MaxDescriptionBytes = 1024
	MaxSubagents        = 16
	MaxTimeout          = 24 * time.Hour
)

// Agent is a named, versioned chat configuration. Its JSON form is the
// API's agent object: the name, the definition's fields, and the version's
// metadata.
type Agent struct {
	Name string `json:"name"`
	Definition
	// Version is the number of the version shown: the current one, or
	// the one a list of versions holds. Versions of a name count from 1.
	Version int    `json:"version"`
	Source  string `json:"source"`          // SourceAPI or SourceConfig
	Owner   string `json:"owner,omitempty"` // "" for a config agent
	// CreatedAt is when the agent was created; UpdatedAt when its
	// current version was written. In a list of versions both are the
	// version's time.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Deleted marks an agent that was deleted: its versions stay readable
	// for the chats that use them.
	Deleted bool `json:"-"`
}

// Definition is what an agent sets for the chats made from it: the part of
// an agent that each version holds.
type Definition struct {
	Description  string             `json:"description"`
	Model        string             `json:"model"` // "": the server's default model
	SystemPrompt string             `json:"system_prompt"`
	Tools        chat.ToolGlobs     `json:"tools"` // nil: every server-side tool
	DynamicTools []chat.DynamicTool `json:"dynamic_tools"`
	Approve      chat.ToolGlobs     `json:"approve"`
	OutputSchema json.RawMessage    `json:"output_schema,omitempty"`
	Subagents    []string           `json:"subagents"`
	Labels       map[string]string  `json:"labels"`
	Limits       Limits             `json:"limits"`
}

// Limits bound the runs of a chat made from the agent.
type Limits struct {
	MaxSteps int    `json:"max_steps,omitempty"` // model calls per run; 0: the server's
	Timeout  string `json:"timeout,omitempty"`   // a Go duration, "10m"; "": the server's
}

// TimeoutDuration is Limits.Timeout parsed; 0 when it is unset.
func (l Limits) TimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(l.Timeout)
	return d
}

// HasOutputSchema reports whether the definition asks for structured output.
func (d Definition) HasOutputSchema() bool {
	s := bytes.TrimSpace(d.OutputSchema)
	return len(s) > 0 && !bytes.Equal(s, []byte("null"))
}

// ResponseFormat is the response format a chat made from the agent starts
// with: its output schema under the agent's name; nil without one.
func (a Agent) ResponseFormat() *chat.ResponseFormat {
	if !a.HasOutputSchema() {
		return nil
	}
	return &chat.ResponseFormat{Type: "json_schema", JSONSchema: chat.OutputFormat{Name: a.Name, Schema: a.OutputSchema}}
}

// nameRE is what an agent's name may be: a slug.
var nameRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// CheckName reports a name that is not a slug (1 to 64 lower-case letters,
// digits, '-' or '_').
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return &chat.ValidationError{Field: "name", Message: fmt.Sprintf("%q must be 1 to 64 lower-case letters, digits, '-' or '_'", name)}
	}
	return nil
}

// Normalize gives the empty values of a definition their one form, so a
// stored agent reads back as it was written: no labels or subagents are
// empty, not null; an output schema of JSON null is none.
func (d *Definition) Normalize() {
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if d.Subagents == nil {
		d.Subagents = []string{}
	}
	if d.DynamicTools == nil {
		d.DynamicTools = []chat.DynamicTool{}
	}
	for i := range d.DynamicTools {
		if !d.DynamicTools[i].HasOutputSchema() {
			d.DynamicTools[i].OutputSchema = nil
		}
	}
	if len(d.Approve) == 0 {
		d.Approve = nil
	}
	if !d.HasOutputSchema() {
		d.OutputSchema = nil
	} else {
		var buf bytes.Buffer
		if json.Compact(&buf, d.OutputSchema) == nil {
			d.OutputSchema = buf.Bytes()
		}
	}
}

// Checker checks agents against what the server offers.
type Checker struct {
	// Model reports a configured model's name.
	Model func(name string) bool
	// ServerTool reports a server-side tool's name, which a dynamic tool
	// may not take; nil: none is known yet.
	ServerTool func(name string) bool
	Limits     chat.Limits
	// MaxDepth is how deep delegation may go: 1 lets an agent name
	// subagents that name none.
	MaxDepth int
	// MaxSteps is the server's limit of model calls per run, which an
	// agent's limits.max_steps may lower but not raise; 0: no limit.
	MaxSteps int
}

// Check reports the first field of a that is wrong, as a
// *chat.ValidationError naming it. It checks the agent alone; CheckGraph
// checks its subagents against the others.
func (c Checker) Check(a *Agent) error {
	if err := CheckName(a.Name); err != nil {
		return err
	}
	d := &a.Definition
	d.Normalize()
	if err := checkText("description", d.Description, MaxDescriptionBytes); err != nil {
		return err
	}
	if d.Model != "" && !c.Model(d.Model) {
		return &chat.ValidationError{Field: "model", Message: fmt.Sprintf("model %q is not configured", d.Model)}
	}
	if err := checkText("system_prompt", d.SystemPrompt, c.Limits.MaxSystemPrompt); err != nil {
		return err
	}
	if err := d.Tools.Validate("tools", c.Limits); err != nil {
		return err
	}
	if err := d.Approve.Validate("approve", c.Limits); err != nil {
		return err
	}
	if err := chat.ValidateDynamicTools(d.DynamicTools, c.ServerTool, c.Limits); err != nil {
		return err
	}
	if d.HasOutputSchema() {
		f := chat.OutputFormat{Name: a.Name, Schema: d.OutputSchema}
		if err := f.Check("output_schema"); err != nil {
			var ve *chat.ValidationError
			if errors.As(err, &ve) {
				ve.Field = "output_schema" // the name is the agent's, checked above
			}
			return err
		}
	}
	if err := chat.ValidateLabels(d.Labels, c.Limits); err != nil {
		return err
	}
	if len(d.Subagents) > MaxSubagents {
		return &chat.ValidationError{Field: "subagents", Message: fmt.Sprintf("at most %d subagents, got %d", MaxSubagents, len(d.Subagents))}
	}
	seen := map[string]bool{}
	for i, s := range d.Subagents {
		field := fmt.Sprintf("subagents[%d]", i)
		if err := CheckName(s); err != nil {
			return &chat.ValidationError{Field: field, Message: err.(*chat.ValidationError).Message}
		}
		if seen[s] {
			return &chat.ValidationError{Field: field, Message: fmt.Sprintf("%q is named twice", s)}
		}
		if s == a.Name {
			return &chat.ValidationError{Field: field, Message: "an agent cannot be its own subagent"}
		}
		seen[s] = true
	}
	if n := d.Limits.MaxSteps; n < 0 || (c.MaxSteps > 0 && n > c.MaxSteps) {
		return &chat.ValidationError{Field: "limits.max_steps", Message: fmt.Sprintf("%d must be from 0 (the server's limit) to the server's limits.max_steps (%d)", n, c.MaxSteps)}
	}
	if t := d.Limits.Timeout; t != "" {
		v, err := time.ParseDuration(t)
		if err != nil || v <= 0 || v > MaxTimeout {
			return &chat.ValidationError{Field: "limits.timeout", Message: fmt.Sprintf("%q must be a duration (like 90s or 10m) above 0 and at most %s", t, MaxTimeout)}
		}
	}
	return nil
}

// CheckGraph checks a's subagents against the agents it can see (lookup;
// a itself as it will be): each exists, and neither a nor any agent that
// delegates to it, directly or not, delegates deeper than MaxDepth. The
// error names "subagents" (or the subagent's index).
func (c Checker) CheckGraph(a Agent, lookup func(name string) (Agent, bool), all []Agent) error {
	for i, s := range a.Subagents {
		if _, ok := lookup(s); !ok {
			return &chat.ValidationError{Field: fmt.Sprintf("subagents[%d]", i), Message: fmt.Sprintf("agent %q does not exist", s)}
		}
	}
	get := func(name string) (Agent, bool) {
		if name == a.Name {
			return a, true
		}
		return lookup(name)
	}
	depth := map[string]int{}
	var depthOf func(name string, path []string) (int, error)
	depthOf = func(name string, path []string) (int, error) {
		if d, ok := depth[name]; ok {
			return d, nil
		}
		for _, p := range path {
			if p == name {
				return 0, &chat.ValidationError{Field: "subagents", Message: fmt.Sprintf("delegation goes round in a circle: %s -> %s", strings.Join(path, " -> "), name)}
			}
		}
		ag, ok := get(name)
		if !ok {
			return 0, nil // a missing subagent of another agent counts as a leaf
		}
		d := 0
		for _, s := range ag.Subagents {
			sd, err := depthOf(s, append(path, name))
			if err != nil {
				return 0, err
			}
			d = max(d, sd+1)
		}
		depth[name] = d
		return d, nil
	}
	d, err := depthOf(a.Name, nil)
	if err != nil {
		return err
	}
	if d > c.MaxDepth {
		return &chat.ValidationError{Field: "subagents", Message: fmt.Sprintf(
			"delegation would go %d levels deep, more than subagents.max_depth (%d): a subagent of this agent has subagents of its own", d, c.MaxDepth)}
	}
	for _, o := range all {
		if o.Name == a.Name {
			continue
		}
		od, err := depthOf(o.Name, nil)
		if err != nil {
			return err
		}
		if od > c.MaxDepth {
			return &chat.ValidationError{Field: "subagents", Message: fmt.Sprintf(
				"agent %q delegates to this agent, and would then delegate %d levels deep, more than subagents.max_depth (%d)", o.Name, od, c.MaxDepth)}
		}
	}
	return nil
}

// checkText checks a free-text field's size and encoding.
func checkText(field, v string, maxBytes int) error {
	switch {
	case !validUTF8NoNUL(v):
		return &chat.ValidationError{Field: field, Message: "must be valid UTF-8 without NUL"}
	case len(v) > maxBytes:
		return &chat.ValidationError{Field: field, Message: fmt.Sprintf("is %d bytes, at most %d allowed", len(v), maxBytes)}
	}
	return nil
}

func validUTF8NoNUL(s string) bool {
	return strings.ToValidUTF8(s, "\uFFFD") == s && !strings.ContainsRune(s, 0)
}

// Decode reads a definition written as JSON (a request body, an entry of
// the configuration file): every field known, the types right. A field of
// the wrong type is a *chat.ValidationError naming it.
func Decode(raw []byte, a *Agent) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(a); err != nil {
		return jsonFieldError(err)
	}
	return nil
}

// jsonFieldError turns a decoding error into one naming the field.
func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := strings.TrimPrefix(te.Field, "Definition.") // the embedded struct is no level of the JSON
		if field == "" {
			field = "body"
		}
		return &chat.ValidationError{Field: field, Message: fmt.Sprintf("must be %s, not %s", jsonType(te.Type.Kind().String()), te.Value)}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &chat.ValidationError{Field: strings.Trim(f, `"`), Message: "is not a field of an agent"}
	}
	return &chat.ValidationError{Field: "body", Message: msg}
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int64":
		return "an integer"
	case "bool":
		return "true or false"
	}
	return kind
}

// readOnly are the agent object's fields a client may send back but not
// change: a request that carries them is not refused for it.
var readOnly = map[string]bool{"version": true, "source": true, "owner": true, "created_at": true, "updated_at": true}

// Merge applies a PATCH body to a definition: each field given replaces the
// definition's (null clears it); the rest stay. A field that is no field of
// an agent is a *chat.ValidationError naming it. name, when given, must be
// the agent's own (an agent is not renamed).
func Merge(a Agent, patch map[string]json.RawMessage) (Agent, error) {
	if raw, ok := patch["name"]; ok {
		var n string
		if json.Unmarshal(raw, &n) != nil || n != a.Name {
			return Agent{}, &chat.ValidationError{Field: "name", Message: "an agent cannot be renamed; create one under the new name"}
		}
	}
	cur, err := json.Marshal(a.Definition)
	if err != nil {
		return Agent{}, fmt.Errorf("encode agent %s: %w", a.Name, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(cur, &fields); err != nil {
		return Agent{}, fmt.Errorf("encode agent %s: %w", a.Name, err)
	}
	for k, v := range patch {
		if k == "name" || readOnly[k] {
			continue
		}
		if _, ok := fields[k]; !ok && k != "output_schema" {
			return Agent{}, &chat.ValidationError{Field: k, Message: "is not a field of an agent"}
		}
		fields[k] = v
	}
	merged, err := json.Marshal(fields)
	if err != nil {
		return Agent{}, fmt.Errorf("merge agent %s: %w", a.Name, err)
	}
	out := Agent{Name: a.Name}
	if err := Decode(merged, &out); err != nil {
		return Agent{}, err
	}
	return out, nil
}
