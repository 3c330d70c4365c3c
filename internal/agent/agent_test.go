package agent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
)

func checker(depth int) Checker {
	return Checker{Model: func(n string) bool { return n == "m" }, Limits: chat.DefaultLimits, MaxDepth: depth}
}

func field(t *testing.T, err error) string {
	t.Helper()
	var ve *chat.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a validation error", err)
	}
	return ve.Field
}

// lookupOf finds agents among as.
func lookupOf(as ...Agent) func(string) (Agent, bool) {
	return func(n string) (Agent, bool) {
		for _, a := range as {
			if a.Name == n {
				return a, true
			}
		}
		return Agent{}, false
	}
}

func withSubs(name string, subs ...string) Agent {
	return Agent{Name: name, Definition: Definition{Subagents: subs}}
}

// TestCheckGraphDepth: delegation deeper than MaxDepth is refused both
// ways: an agent naming one that delegates, and an agent getting
// subagents while another names it; a cycle is refused at any depth.
func TestCheckGraphDepth(t *testing.T) {
	leaf, lead := withSubs("leaf"), withSubs("lead", "leaf")
	all := []Agent{leaf, lead}
	c := checker(1)
	if err := c.CheckGraph(withSubs("new", "leaf"), lookupOf(all...), all); err != nil {
		t.Fatalf("naming a leaf: %v", err)
	}
	err := c.CheckGraph(withSubs("top", "lead"), lookupOf(all...), all)
	if field(t, err) != "subagents" || !strings.Contains(err.Error(), "2 levels") {
		t.Fatalf("naming an agent that delegates: %v", err)
	}
	other := withSubs("other")
	all = append(all, other)
	err = c.CheckGraph(withSubs("leaf", "other"), lookupOf(all...), all)
	if field(t, err) != "subagents" || !strings.Contains(err.Error(), `"lead"`) {
		t.Fatalf("a subagent getting subagents: %v", err)
	}
	if err := checker(2).CheckGraph(withSubs("top", "lead"), lookupOf(all...), all); err != nil {
		t.Fatalf("two levels under depth 2: %v", err)
	}
	a, b := withSubs("a", "b"), withSubs("b", "a")
	err = checker(5).CheckGraph(a, lookupOf(a, b), []Agent{a, b})
	if field(t, err) != "subagents" || !strings.Contains(err.Error(), "circle") {
		t.Fatalf("a cycle: %v", err)
	}
	err = c.CheckGraph(withSubs("x", "ghost"), lookupOf(all...), all)
	if field(t, err) != "subagents[0]" {
		t.Fatalf("an unknown subagent: %v", err)
	}
}

// TestMerge: PATCH replaces the fields it gives, null clears one, and an
// unknown field or a rename is refused naming it.
func TestMerge(t *testing.T) {
	cur := Agent{Name: "a", Definition: Definition{Model: "m", SystemPrompt: "p", Tools: chat.ToolGlobs{"x"},
		OutputSchema: json.RawMessage(`{"type":"object"}`), Labels: map[string]string{"k": "v"}}}
	patch := map[string]json.RawMessage{"system_prompt": json.RawMessage(`"q"`), "output_schema": json.RawMessage(`null`),
		"tools": json.RawMessage(`null`), "version": json.RawMessage(`7`), "name": json.RawMessage(`"a"`)}
	got, err := Merge(cur, patch)
	if err != nil {
		t.Fatal(err)
	}
	got.Normalize()
	if got.Model != "m" || got.SystemPrompt != "q" || got.HasOutputSchema() || got.Tools != nil || got.Labels["k"] != "v" || got.Version != 0 {
		t.Fatalf("merged %+v", got)
	}
	if got, _ := Merge(cur, map[string]json.RawMessage{"output_schema": json.RawMessage(`{"type":"object","properties":{}}`)}); !got.HasOutputSchema() {
		t.Fatal("a schema given to an agent without one was dropped")
	}
	for name, p := range map[string]map[string]json.RawMessage{
		"modle":  {"modle": json.RawMessage(`"m"`)},
		"name":   {"name": json.RawMessage(`"b"`)},
		"labels": {"labels": json.RawMessage(`"x"`)},
	} {
		if _, err := Merge(cur, p); field(t, err) != name {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCheckFields names the field of each refusal.
func TestCheckFields(t *testing.T) {
	for want, a := range map[string]Agent{
		"name":           {Name: "A"},
		"model":          {Name: "a", Definition: Definition{Model: "x"}},
		"description":    {Name: "a", Definition: Definition{Description: strings.Repeat("d", MaxDescriptionBytes+1)}},
		"output_schema":  {Name: "a", Definition: Definition{OutputSchema: json.RawMessage(`{"type":"array"}`)}},
		"subagents[1]":   {Name: "a", Definition: Definition{Subagents: []string{"b", "b"}}},
		"subagents[0]":   {Name: "a", Definition: Definition{Subagents: []string{"a"}}},
		"limits.timeout": {Name: "a", Definition: Definition{Limits: Limits{Timeout: "25h"}}},
	} {
		if err := checker(1).Check(&a); field(t, err) != want {
			t.Errorf("%s: %v", want, err)
		}
	}
	ok := Agent{Name: "a-1_b", Definition: Definition{Model: "m", Limits: Limits{Timeout: "10m"}}}
	if err := checker(1).Check(&ok); err != nil || ok.Limits.TimeoutDuration().Minutes() != 10 {
		t.Fatalf("a valid agent: %v", err)
	}
}
