package facade

import (
	"encoding/json"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
)

func TestConversationMapping(t *testing.T) {
	var req completionRequest
	body := `{"model":"m","messages":[
		{"role":"developer","content":"Be kind."},
		{"role":"user","content":[{"type":"text","text":"two "},{"type":"text","text":"cities"}]},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"a","type":"function","function":{"name":"w","arguments":"{\"c\":1}"}},
			{"id":"b","type":"function","function":{"name":"w","arguments":""}}]},
		{"role":"tool","tool_call_id":"b","content":"rain"},
		{"role":"system","content":"Be brief."},
		{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"sun"}]}]}`
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	cv, err := req.conversation(1<<20, fileRules{})
	if err != nil {
		t.Fatal(err)
	}
	if cv.System != "Be kind.\n\nBe brief." || len(cv.History) != 3 {
		t.Fatalf("system %q, history %+v", cv.System, cv.History)
	}
	if u := cv.History[0]; u.Role != chat.RoleUser || u.Parts[0].Text != "two cities" {
		t.Fatalf("user %+v", u)
	}
	if a := cv.History[1]; len(a.Parts) != 2 || string(a.Parts[1].Args) != "{}" {
		t.Fatalf("assistant %+v", a)
	}
	// The results stand in call order, whatever the request's order.
	tm := cv.History[2]
	if tm.Role != chat.RoleTool || len(tm.Parts) != 2 || tm.Parts[0].ToolCallID != "a" || string(tm.Parts[0].Output) != `"sun"` ||
		tm.Parts[1].ToolCallID != "b" || tm.Parts[1].ToolName != "w" {
		t.Fatalf("tool message %+v", tm)
	}
	if len(cv.Results) != 2 {
		t.Fatalf("trailing results %+v", cv.Results)
	}
	if err := chat.CheckHistory(chat.Waiting, cv.History, nil); err != nil {
		t.Fatal(err)
	}
}

func TestConversationRefusals(t *testing.T) {
	for name, msgs := range map[string]string{
		"none":              `[]`,
		"system only":       `[{"role":"system","content":"x"}]`,
		"bad image":         `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,%%%"}}]}]`,
		"empty user":        `[{"role":"user","content":"  "}]`,
		"unknown role":      `[{"role":"function","content":"x"}]`,
		"bad arguments":     `[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"w","arguments":"{"}}]}]`,
		"twice answered":    `[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"w","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"1"},{"role":"tool","tool_call_id":"a","content":"2"}]`,
		"assistant last":    `[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]`,
		"result after user": `[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"w","arguments":"{}"}}]},{"role":"user","content":"z"},{"role":"tool","tool_call_id":"a","content":"1"}]`,
	} {
		req := completionRequest{Model: "m"}
		if err := json.Unmarshal([]byte(msgs), &req.Messages); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err := req.conversation(1<<20, fileRules{})
		ae, ok := err.(*apiError)
		if !ok || ae.Status != 400 || ae.Param == nil {
			t.Errorf("%s: %v, want a 400 naming its param", name, err)
		}
	}
}
