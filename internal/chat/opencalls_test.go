package chat

import (
	"encoding/json"
	"slices"
	"testing"
)

func callIDs(calls []ToolCall) []string {
	ids := []string{}
	for _, c := range calls {
		ids = append(ids, c.ToolCallID)
	}
	return ids
}

// TestSortOpenCalls: of a step's open calls, a dynamic tool's and an
// undecided one are unseen, an approved one never marked started is
// approved (with its edited arguments), and a plain server-side call and
// an approved one marked started may have run; Stopped answers them in
// call order, "outcome unknown" for those that may have run.
func TestSortOpenCalls(t *testing.T) {
	call := func(id, name string) Part {
		return Part{Type: PartToolCall, ToolCallID: id, ToolName: name, Args: json.RawMessage(`{}`)}
	}
	decide := func(id, name string, args string) Part {
		p := Part{Type: PartToolDecision, ToolCallID: id, ToolName: name, Decision: &Decision{Approved: true}}
		if args != "" {
			p.Args = json.RawMessage(args)
		}
		return p
	}
	history := []Message{
		{ID: 1, Role: RoleUser, Parts: []Part{TextPart("go")}},
		{ID: 2, Role: RoleAssistant, Parts: []Part{call("a", "ask"), call("b", "add"), call("c", "deploy"), call("d", "deploy"), call("e", "add")}},
		{ID: 3, Role: RoleTool, Parts: []Part{decide("c", "deploy", `{"edited":true}`), decide("d", "deploy", ""),
			{Type: PartToolStarted, ToolCallID: "d", ToolName: "deploy"},
			{Type: PartToolResult, ToolCallID: "e", ToolName: "add", Output: json.RawMessage(`2`)}}},
	}
	o := SortOpenCalls(history, []DynamicTool{{Name: "ask"}}, func(name string) bool { return name == "deploy" })
	if got := callIDs(o.Unseen); !slices.Equal(got, []string{"a"}) {
		t.Errorf("unseen %v, want [a]", got)
	}
	if got := callIDs(o.Approved); !slices.Equal(got, []string{"c"}) || string(o.Approved[0].Args) != `{"edited":true}` {
		t.Errorf("approved %v (%+v), want [c] with its edited arguments", got, o.Approved)
	}
	if got := callIDs(o.MayHaveRun); !slices.Equal(got, []string{"b", "d"}) {
		t.Errorf("may have run %v, want [b d]", got)
	}
	stopped := o.Stopped(ReasonInterrupted)
	want := []struct{ id, reason string }{{"a", ReasonInterrupted}, {"b", ReasonUnknownOutcome}, {"c", ReasonInterrupted}, {"d", ReasonUnknownOutcome}}
	if len(stopped) != len(want) {
		t.Fatalf("stopped %+v, want %d results", stopped, len(want))
	}
	for i, w := range want {
		var got string
		if err := json.Unmarshal(stopped[i].Output, &got); err != nil || stopped[i].ToolCallID != w.id || got != w.reason || !stopped[i].IsError {
			t.Errorf("result %d: %s %s, want %s %q", i, stopped[i].ToolCallID, stopped[i].Output, w.id, w.reason)
		}
	}

	// Without dynamic tools, decisions or tools that need approval, every
	// open call is a server-side call that may have run.
	if o := SortOpenCalls(history[:2], nil, func(string) bool { return false }); len(o.Unseen) != 0 || len(o.MayHaveRun) != 5 {
		t.Errorf("without dynamic tools or approvals every call may have run: %+v", o)
	}
}
