package chat

import (
	"strings"
	"testing"
)

func callPart(id, name string) Part { return Part{Type: PartToolCall, ToolCallID: id, ToolName: name} }
func resultPart(id string) Part     { return Part{Type: PartToolResult, ToolCallID: id} }

// A result written after a later user message (a history a failed run left
// behind) goes back to its call, and the user message follows it.
func TestForModelMovesALateResultBackToItsCall(t *testing.T) {
	h := []Message{
		{ID: 1, Role: RoleUser},
		{ID: 2, Role: RoleAssistant, Parts: []Part{callPart("a", "x"), callPart("b", "y")}},
		{ID: 3, Role: RoleTool, Parts: []Part{resultPart("a")}},
		{ID: 4, Role: RoleUser, Parts: []Part{TextPart("hello?")}},
		{ID: 5, Role: RoleTool, Parts: []Part{resultPart("b")}},
	}
	got := ForModel(h)
	var shape []string
	for _, m := range got {
		s := string(m.Role)
		for _, p := range m.Parts {
			if p.Type == PartToolResult {
				s += ":" + p.ToolCallID
			}
		}
		shape = append(shape, s)
	}
	if want := "user,assistant,tool:a:b,user"; strings.Join(shape, ",") != want {
		t.Fatalf("model history %v, want %s", shape, want)
	}
	if err := CheckHistory(Waiting, got, nil); err != nil {
		t.Fatalf("ForModel's output breaks the invariant: %v", err)
	}
}

// A call without any result gets an error result; a stray or second result
// is dropped.
func TestForModelAnswersMissingAndDropsStrayResults(t *testing.T) {
	h := []Message{
		{ID: 1, Role: RoleUser},
		{ID: 2, Role: RoleTool, Parts: []Part{resultPart("zz")}},
		{ID: 3, Role: RoleAssistant, Parts: []Part{callPart("a", "x"), callPart("b", "y")}},
		{ID: 4, Role: RoleTool, Parts: []Part{resultPart("b"), resultPart("b"), resultPart("q")}},
		{ID: 5, Role: RoleUser},
	}
	got := ForModel(h)
	if len(got) != 4 {
		t.Fatalf("got %d messages, want 4: %+v", len(got), got)
	}
	res := got[2].Parts
	if len(res) != 2 || res[0].ToolCallID != "a" || !res[0].IsError || !strings.Contains(string(res[0].Output), "no result") || res[1].ToolCallID != "b" {
		t.Fatalf("results %+v", res)
	}
	if err := CheckHistory(Waiting, got, nil); err != nil {
		t.Fatal(err)
	}
}

func TestCheckHistory(t *testing.T) {
	client := func(c ToolCall) bool { return c.ToolName == "dyn" }
	asst := func(id int64, calls ...Part) Message { return Message{ID: id, Role: RoleAssistant, Parts: calls} }
	tool := func(id int64, res ...Part) Message { return Message{ID: id, Role: RoleTool, Parts: res} }
	user := func(id int64) Message { return Message{ID: id, Role: RoleUser} }
	cases := []struct {
		name    string
		status  Status
		h       []Message
		wantErr string // "" for none
	}{
		{"answered in two messages", Waiting, []Message{user(1), asst(2, callPart("a", "s"), callPart("b", "dyn")), tool(3, resultPart("a")), tool(4, resultPart("b")), asst(5)}, ""},
		{"client call waits", RequiresAction, []Message{user(1), asst(2, callPart("a", "s"), callPart("b", "dyn")), tool(3, resultPart("a"))}, ""},
		{"server call open in requires_action", RequiresAction, []Message{user(1), asst(2, callPart("a", "s"), callPart("b", "dyn")), tool(3, resultPart("b"))}, "call a (s) is open in a requires_action chat"},
		{"open call in waiting", Waiting, []Message{user(1), asst(2, callPart("a", "dyn"))}, "is open in a waiting chat"},
		{"open call in error", Error, []Message{user(1), asst(2, callPart("a", "s"))}, "is open in a error chat"},
		{"user message after open call", Pending, []Message{user(1), asst(2, callPart("a", "s")), user(3), tool(4, resultPart("a"))}, "has no result before message 3"},
		{"result out of order", Waiting, []Message{user(1), asst(2, callPart("a", "s"), callPart("b", "s")), tool(3, resultPart("b"), resultPart("a"))}, "out of call order"},
		{"two results", Waiting, []Message{user(1), asst(2, callPart("a", "s")), tool(3, resultPart("a")), tool(4, resultPart("a"))}, "a second result for a"},
		{"unknown result", Waiting, []Message{user(1), asst(2, callPart("a", "s")), tool(3, resultPart("a"), resultPart("x"))}, "did not call"},
		{"tool message after user", Waiting, []Message{user(1), tool(2, resultPart("a"))}, "does not follow an assistant message"},
		{"reused call id", Waiting, []Message{user(1), asst(2, callPart("a", "s")), tool(3, resultPart("a")), user(4), asst(5, callPart("a", "s")), tool(6, resultPart("a"))}, "call id a used before"},
		{"requires_action with nothing open", RequiresAction, []Message{user(1), asst(2)}, "no open call"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckHistory(c.status, c.h, client)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("unexpected breach: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}
