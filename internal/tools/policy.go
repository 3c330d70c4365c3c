package tools

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/parleyhq/parley/tool"
)

// Approval policies: whether a server-side tool's calls wait for a person to
// approve, edit or deny them before they run.
const (
	// ApprovalNever: calls run at once. The default.
	ApprovalNever = "never"
	// ApprovalAlways: every call waits for a decision.
	ApprovalAlways = "always"
	// ApprovalDestructive: a call waits unless its tool is annotated
	// readOnlyHint true or destructiveHint false; a tool without those
	// annotations waits.
	ApprovalDestructive = "destructive"
)

// ApprovalPolicies lists the policies, the default first.
var ApprovalPolicies = []string{ApprovalNever, ApprovalAlways, ApprovalDestructive}

// ApprovalRule gives the tools whose names match Match the policy Approval.
// Match is a glob (path.Match syntax) over tool names as the model sees
// them, such as "github_*" or "http_fetch".
type ApprovalRule struct {
	Match    string
	Approval string
}

// ApprovalPolicy decides which server-side tools need approval. A tool's
// policy is that of the first rule whose glob matches its name, else its
// source's entry in Sources, else never (so built-in tools, which have no
// source entry, are never unless a rule names them). The zero value is
// never for every tool.
type ApprovalPolicy struct {
	Sources map[string]string // source name -> the policy of its tools
	Rules   []ApprovalRule    // in order; the first match wins
}

// Validate checks every policy value and glob.
func (p ApprovalPolicy) Validate() error {
	names := make([]string, 0, len(p.Sources))
	for name := range p.Sources {
		names = append(names, name)
	}
	slices.Sort(names) // the same error for the same policy
	for _, name := range names {
		if err := checkPolicy(p.Sources[name]); err != nil {
			return fmt.Errorf("approval policy of tool source %q: %w", name, err)
		}
	}
	for i, r := range p.Rules {
		if _, err := path.Match(r.Match, ""); err != nil || r.Match == "" {
			return fmt.Errorf("approval rule %d: match %q is not a glob (path.Match syntax, like \"github_*\")", i, r.Match)
		}
		if err := checkPolicy(r.Approval); err != nil {
			return fmt.Errorf("approval rule %d (%s): %w", i, r.Match, err)
		}
	}
	return nil
}

func checkPolicy(v string) error {
	if !slices.Contains(ApprovalPolicies, v) {
		return fmt.Errorf("approval %q is not one of %s", v, strings.Join(ApprovalPolicies, ", "))
	}
	return nil
}

// Resolve returns the approval of the tool name of source (BuiltinSource
// for a built-in tool) declared with annotations a: its policy (see
// ApprovalPolicy) and whether that policy requires approval of it: never
// requires nothing, always everything, and destructive every tool that is
// not annotated readOnlyHint true or destructiveHint false.
func (p ApprovalPolicy) Resolve(name, source string, a *tool.Annotations) Approval {
	policy := ApprovalNever
	if v := p.Sources[source]; v != "" && source != BuiltinSource {
		policy = v
	}
	for _, r := range p.Rules {
		if ok, _ := path.Match(r.Match, name); ok {
			policy = r.Approval
			break
		}
	}
	return Approval{Policy: policy, Required: requires(policy, a)}
}

// requires applies a policy to a tool's annotations (see Resolve). An
// unknown policy, which Validate refuses, requires approval: the safe side.
func requires(policy string, a *tool.Annotations) bool {
	switch policy {
	case ApprovalNever:
		return false
	case ApprovalDestructive:
		return !harmless(a)
	}
	return true
}

// harmless reports whether annotations say a tool only reads or only adds.
func harmless(a *tool.Annotations) bool {
	if a == nil {
		return false
	}
	return (a.ReadOnlyHint != nil && *a.ReadOnlyHint) || (a.DestructiveHint != nil && !*a.DestructiveHint)
}
