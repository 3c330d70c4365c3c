package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyhq/parley/tool"
)

func hints(readOnly, destructive *bool) *tool.Annotations {
	return &tool.Annotations{ReadOnlyHint: readOnly, DestructiveHint: destructive}
}

func TestApprovalPolicyResolve(t *testing.T) {
	yes, no := true, false
	anns := []struct {
		name string
		a    *tool.Annotations
		// whether destructive requires approval
		destructive bool
	}{
		{"absent", nil, true},
		{"empty", &tool.Annotations{}, true},
		{"readOnly", hints(&yes, nil), false},
		{"destructive false", hints(nil, &no), false},
		{"read-only built-in", tool.ReadOnly(), false},
		{"destructive true", hints(nil, &yes), true},
		{"readOnly false", hints(&no, nil), true},
		{"readOnly false, destructive false", hints(&no, &no), false},
		{"readOnly true, destructive true", hints(&yes, &yes), false},
		{"only other hints", &tool.Annotations{IdempotentHint: &yes, OpenWorldHint: &no}, true},
	}
	for _, policy := range ApprovalPolicies {
		for _, a := range anns {
			want := map[string]bool{ApprovalNever: false, ApprovalAlways: true, ApprovalDestructive: a.destructive}[policy]
			p := ApprovalPolicy{Sources: map[string]string{"src": policy}}
			got := p.Resolve("src_tool", "src", a.a)
			if got != (Approval{Policy: policy, Required: want}) {
				t.Errorf("%s, annotations %s: %+v, want required %v", policy, a.name, got, want)
			}
		}
	}
}

func TestApprovalPolicyRules(t *testing.T) {
	p := ApprovalPolicy{
		Sources: map[string]string{"github": ApprovalAlways, "files": ApprovalDestructive, BuiltinSource: ApprovalAlways},
		Rules: []ApprovalRule{
			{Match: "github_get_*", Approval: ApprovalNever},
			{Match: "github_*", Approval: ApprovalDestructive}, // after the rule above: get_ stays never
			{Match: "http_fetch", Approval: ApprovalAlways},
			{Match: "files_read", Approval: ApprovalNever},
		},
	}
	cases := []struct {
		name, source string
		a            *tool.Annotations
		want         Approval
	}{
		{"github_get_issue", "github", nil, Approval{ApprovalNever, false}},            // the first match wins
		{"github_delete_repo", "github", nil, Approval{ApprovalDestructive, true}},     // the second rule over the source default
		{"http_fetch", BuiltinSource, tool.ReadOnly(), Approval{ApprovalAlways, true}}, // a built-in matched by a rule
		{"current_time", BuiltinSource, nil, Approval{ApprovalNever, false}},           // a built-in has no source default
		{"files_read", "files", nil, Approval{ApprovalNever, false}},
		{"files_write", "files", nil, Approval{ApprovalDestructive, true}},             // the source default
		{"files_list", "files", tool.ReadOnly(), Approval{ApprovalDestructive, false}}, // the source default, read-only
		{"lua_thing", "lua", nil, Approval{ApprovalNever, false}},                      // a source without entry
	}
	for _, tc := range cases {
		if got := p.Resolve(tc.name, tc.source, tc.a); got != tc.want {
			t.Errorf("%s (%s): %+v, want %+v", tc.name, tc.source, got, tc.want)
		}
	}
	if got := (ApprovalPolicy{}).Resolve("x", "y", nil); got != (Approval{ApprovalNever, false}) {
		t.Errorf("zero policy: %+v", got)
	}
}

func TestApprovalPolicyValidate(t *testing.T) {
	if err := (ApprovalPolicy{}).Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		p    ApprovalPolicy
		want string
	}{
		{ApprovalPolicy{Sources: map[string]string{"lua": "sometimes"}}, `tool source "lua": approval "sometimes" is not one of never, always, destructive`},
		{ApprovalPolicy{Sources: map[string]string{"lua": ""}}, `approval "" is not one of`},
		{ApprovalPolicy{Rules: []ApprovalRule{{Match: "[", Approval: "always"}}}, `approval rule 0: match "[" is not a glob`},
		{ApprovalPolicy{Rules: []ApprovalRule{{Match: "", Approval: "always"}}}, `match "" is not a glob`},
		{ApprovalPolicy{Rules: []ApprovalRule{{Match: "a", Approval: "never"}, {Match: "b_*", Approval: "Always"}}}, `approval rule 1 (b_*): approval "Always"`},
	}
	for _, tc := range cases {
		if err := tc.p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want one containing %q", tc.p, err, tc.want)
		}
	}
}

// approvals maps each listed tool to its policy and whether it needs approval.
func approvals(t *testing.T, reg *Registry) map[string]Approval {
	t.Helper()
	out := map[string]Approval{}
	for _, d := range reg.Decls(context.Background()) {
		out[d.Name] = d.Approval
		if reg.RequiresApproval(d.Name) != d.Required {
			t.Errorf("%s: RequiresApproval = %v, the listing says %v", d.Name, !d.Required, d.Required)
		}
	}
	return out
}

func TestRegistryApproval(t *testing.T) {
	ro := tool.Func(tool.Decl{Name: "clock", Annotations: tool.ReadOnly()}, nil)
	lua := newFakeSource("lua", "l_one")
	mcp := newFakeSource("mcp", "m_one")
	mcp.decls = append(mcp.decls, tool.Decl{Name: "m_read", Annotations: tool.ReadOnly()})

	reg := NewRegistry(discard())
	if err := reg.SetApprovalPolicy(ApprovalPolicy{
		Sources: map[string]string{"lua": ApprovalAlways, "mcp": ApprovalDestructive},
		Rules:   []ApprovalRule{{Match: "dice", Approval: ApprovalAlways}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddTool(echoTool("dice", nil)); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddTool(ro); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*fakeSource{lua, mcp} {
		if err := reg.AddSource(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]Approval{
		"dice":   {ApprovalAlways, true},
		"clock":  {ApprovalNever, false},
		"l_one":  {ApprovalAlways, true},
		"m_one":  {ApprovalDestructive, true},
		"m_read": {ApprovalDestructive, false},
	}
	got := approvals(t, reg)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %+v, want %+v", name, got[name], w)
		}
	}
	if reg.RequiresApproval("nope") {
		t.Error(`RequiresApproval("nope") = true`)
	}

	b, _ := json.Marshal(reg.Decls(context.Background())[4])
	if w := `{"name":"m_read","description":"","input_schema":{"type":"object","properties":{}},"annotations":{"readOnlyHint":true,"destructiveHint":false},"source":"mcp","approval":"destructive","requires_approval":false}`; string(b) != w {
		t.Errorf("JSON of a decl:\n%s\nwant\n%s", b, w)
	}
	b, _ = json.Marshal(reg.Decls(context.Background())[0])
	if !strings.Contains(string(b), `"source":"builtin","approval":"always","requires_approval":true}`) || strings.Contains(string(b), "annotations") {
		t.Errorf("JSON of a decl without annotations: %s", b)
	}
}

// TestRegistryApprovalFollowsListChanges: a source's new list is published
// with each tool's approval, and a changed annotation alone is a changed
// list.
func TestRegistryApprovalFollowsListChanges(t *testing.T) {
	ctx := context.Background()
	no := false
	mcp := newFakeSource("mcp", "m_one")
	reg := NewRegistry(discard())
	if err := reg.SetApprovalPolicy(ApprovalPolicy{Sources: map[string]string{"mcp": ApprovalDestructive}}); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddSource(ctx, mcp); err != nil {
		t.Fatal(err)
	}
	if !reg.RequiresApproval("m_one") {
		t.Fatal("m_one without annotations needs no approval under destructive")
	}
	before := reg.snapshot()

	one := mcp.decls[0]
	one.Annotations = &tool.Annotations{DestructiveHint: &no}
	mcp.setDecls(one, tool.Decl{Name: "m_new"})
	if err := reg.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if reg.RequiresApproval("m_one") {
		t.Error("m_one, now destructiveHint false, still needs approval: the changed annotation was not adopted")
	}
	if !reg.RequiresApproval("m_new") {
		t.Error("a tool new in the list needs no approval")
	}
	if d := reg.Decls(ctx)[0]; d.Annotations == nil || d.Annotations.DestructiveHint == nil || *d.Annotations.DestructiveHint {
		t.Errorf("m_one listed with annotations %+v", d.Annotations)
	}
	if !before.byName["m_one"].approval.Required {
		t.Error("a refresh changed an entry of an earlier catalog")
	}

	// The annotation removed again: approval again.
	one.Annotations = nil
	mcp.setDecls(one, tool.Decl{Name: "m_new"})
	if err := reg.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if !reg.RequiresApproval("m_one") {
		t.Error("m_one, its annotation gone, needs no approval")
	}
}

// TestSetApprovalPolicyAppliesToRegisteredTools: a policy set after tools
// were registered applies to them, without touching the catalog steps
// already read; an invalid one is refused and the previous one stays.
func TestSetApprovalPolicyAppliesToRegisteredTools(t *testing.T) {
	reg := newRegistry(t, []tool.Tool{echoTool("dice", nil)}, newFakeSource("lua", "l_one"))
	if got := approvals(t, reg); got["dice"] != (Approval{ApprovalNever, false}) || got["l_one"] != (Approval{ApprovalNever, false}) {
		t.Fatalf("without a policy: %+v", got)
	}
	before := reg.snapshot()
	if err := reg.SetApprovalPolicy(ApprovalPolicy{Sources: map[string]string{"lua": ApprovalAlways}}); err != nil {
		t.Fatal(err)
	}
	if !reg.RequiresApproval("l_one") || reg.RequiresApproval("dice") {
		t.Errorf("after the policy: %+v", approvals(t, reg))
	}
	if before.byName["l_one"].approval.Required {
		t.Error("the new policy changed an entry of an earlier catalog")
	}
	if err := reg.SetApprovalPolicy(ApprovalPolicy{Rules: []ApprovalRule{{Match: "[", Approval: ApprovalNever}}}); err == nil {
		t.Fatal("a malformed glob was accepted")
	}
	if !reg.RequiresApproval("l_one") {
		t.Error("a refused policy replaced the previous one")
	}
}
