package chat

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// approvalTurn is an assistant message calling a server-side tool (s1, to
// approve), a dynamic one (d1) and another server-side one (s2), then the
// given tool messages.
func approvalTurn(tail ...Message) []Message {
	call := func(id, name, args string) Part {
		return Part{Type: PartToolCall, ToolCallID: id, ToolName: name, Args: json.RawMessage(args)}
	}
	h := []Message{
		{ID: 1, Role: RoleUser, Parts: []Part{TextPart("go")}},
		{ID: 2, Role: RoleAssistant, Parts: []Part{call("s1", "delete", `{"path":"/"}`), call("d1", "ask", `{}`), call("s2", "delete", `{"path":"/tmp"}`)}},
	}
	for i, m := range tail {
		m.ID = int64(3 + i)
		h = append(h, m)
	}
	return h
}

func decision(id string, approved bool, args string) Part {
	p := Part{Type: PartToolDecision, ToolCallID: id, ToolName: "delete", Decision: &Decision{Approved: approved, DecidedBy: "alice", DecidedAt: time.Now()}}
	if args != "" {
		p.Args = json.RawMessage(args)
	}
	return p
}

func result(id, name, out string) Part {
	return Part{Type: PartToolResult, ToolCallID: id, ToolName: name, Output: json.RawMessage(out)}
}

var askTool = []DynamicTool{{Name: "ask"}}

func TestPendingActionsAndApprovedCalls(t *testing.T) {
	h := approvalTurn()
	got := PendingActions(h, askTool)
	if len(got) != 3 || got[0].Kind != ActionApproval || got[1].Kind != ActionClient || got[2].Kind != ActionApproval {
		t.Fatalf("pending %+v", got)
	}
	h = approvalTurn(Message{Role: RoleTool, Parts: []Part{
		decision("s1", true, `{"path":"/tmp/a"}`), decision("s2", false, ""), {Type: PartToolResult, ToolCallID: "s2", ToolName: "delete", Output: DeniedOutput("no"), IsError: true},
	}})
	got = PendingActions(h, askTool)
	if len(got) != 1 || got[0].ToolCallID != "d1" {
		t.Fatalf("after the decisions, pending %+v", got)
	}
	approved, started := ApprovedCalls(h)
	if len(started) != 0 || len(approved) != 1 || approved[0].ToolCallID != "s1" || string(approved[0].Args) != `{"path":"/tmp/a"}` {
		t.Fatalf("approved %+v", approved)
	}
	if string(DeniedOutput("no")) != `"denied: no"` || string(DeniedOutput("")) != `"denied"` {
		t.Fatalf("denied outputs %s %s", DeniedOutput("no"), DeniedOutput(""))
	}
}

// TestForModelShowsEditedArgsAndNoDecisions: the model reads the call that
// ran (the edited arguments) and its result, never the decision.
func TestForModelShowsEditedArgsAndNoDecisions(t *testing.T) {
	h := approvalTurn(
		Message{Role: RoleTool, Parts: []Part{decision("s1", true, `{"path":"/tmp/a"}`), decision("s2", true, "")}},
		Message{Role: RoleTool, Parts: []Part{result("s1", "delete", `"ok"`), result("d1", "ask", `"yes"`), result("s2", "delete", `"ok"`)}},
	)
	view := ForModel(h)
	if len(view) != 3 {
		t.Fatalf("view %+v", view)
	}
	if args := string(view[1].Parts[0].Args); args != `{"path":"/tmp/a"}` {
		t.Fatalf("the model sees args %s, want the edited ones", args)
	}
	if args := string(view[1].Parts[2].Args); args != `{"path":"/tmp"}` {
		t.Fatalf("an unedited call shows %s", args)
	}
	if string(h[1].Parts[0].Args) != `{"path":"/"}` {
		t.Fatal("ForModel modified the history")
	}
	for _, p := range view[2].Parts {
		if p.Type != PartToolResult {
			t.Fatalf("the model sees a %s part", p.Type)
		}
	}
}

func TestCheckHistoryWithDecisions(t *testing.T) {
	ok := approvalTurn(
		Message{Role: RoleTool, Parts: []Part{decision("s1", true, ""), decision("s2", false, ""), result("s2", "delete", `"denied"`)}},
		Message{Role: RoleTool, Parts: []Part{result("s1", "delete", `"ok"`), result("d1", "ask", `"yes"`)}},
	)
	if err := CheckHistory(Waiting, ok, nil); err != nil {
		t.Fatalf("a valid history: %v", err)
	}
	approvedOnly := func(c ToolCall) bool { return c.ToolCallID == "s1" }
	open := approvalTurn(Message{Role: RoleTool, Parts: []Part{decision("s1", true, ""), result("d1", "ask", `"yes"`), decision("s2", false, ""), result("s2", "delete", `"denied"`)}})
	if err := CheckHistory(Pending, open, approvedOnly); err != nil {
		t.Fatalf("a pending chat with an approved call not run yet: %v", err)
	}
	if err := CheckHistory(Waiting, open, approvedOnly); err == nil {
		t.Fatal("a waiting chat with an open call passed")
	}
	for name, tc := range map[string]struct {
		h    []Message
		want string
	}{
		"decision after the result": {approvalTurn(Message{Role: RoleTool, Parts: []Part{result("s1", "delete", `1`), decision("s1", true, ""), result("d1", "ask", `1`), result("s2", "delete", `1`)}}), "after its result"},
		"two decisions":             {approvalTurn(Message{Role: RoleTool, Parts: []Part{decision("s1", true, ""), decision("s1", false, ""), result("s1", "delete", `1`), result("d1", "ask", `1`), result("s2", "delete", `1`)}}), "another decision"},
		"decision on no call":       {approvalTurn(Message{Role: RoleTool, Parts: []Part{decision("zz", true, ""), result("s1", "delete", `1`), result("d1", "ask", `1`), result("s2", "delete", `1`)}}), "did not call"},
	} {
		err := CheckHistory(Waiting, tc.h, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}
