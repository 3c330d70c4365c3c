package aisdk

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	parse := func(body string) (Action, error) {
		var r Request
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		return r.Parse()
	}
	a, err := parse(`{"id":"c","trigger":"submit-message","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"hi"}]}]}`)
	if err != nil || a.Kind != ActionMessage || a.Text != "hi" {
		t.Fatalf("user message: %+v %v", a, err)
	}
	a, err = parse(`{"id":"c","trigger":"regenerate-message","messages":[]}`)
	if err != nil || a.Kind != ActionRegenerate {
		t.Fatalf("regenerate: %+v %v", a, err)
	}
	a, err = parse(`{"id":"c","messages":[{"id":"a1","role":"assistant","parts":[
		{"type":"step-start"},
		{"type":"dynamic-tool","toolCallId":"s","toolName":"clock","state":"output-available","output":"noon","providerExecuted":true},
		{"type":"dynamic-tool","toolCallId":"c1","toolName":"ask","state":"output-available","output":{"x":1}},
		{"type":"tool-ask","toolCallId":"c2","state":"output-error","errorText":"nope"},
		{"type":"dynamic-tool","toolCallId":"c3","toolName":"rm","state":"approval-responded","providerExecuted":true,"approval":{"id":"c3","approved":false,"reason":"no"}}]}]}`)
	if err != nil || a.Kind != ActionAnswer || a.MessageID != "a1" || len(a.Outputs) != 2 || len(a.Decisions) != 1 {
		t.Fatalf("answer: %+v %v", a, err)
	}
	if string(a.Outputs[0].Output) != `{"x":1}` || !a.Outputs[1].IsError || string(a.Outputs[1].Output) != `"nope"` ||
		a.Decisions[0] != (Decision{ToolCallID: "c3", Approve: false, Reason: "no"}) {
		t.Fatalf("answer: %+v", a)
	}
	for name, body := range map[string]string{
		"no id":               `{"messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`,
		"no messages":         `{"id":"c","messages":[]}`,
		"bad trigger":         `{"id":"c","trigger":"resume","messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`,
		"empty user":          `{"id":"c","messages":[{"role":"user","parts":[]}]}`,
		"file part by data":   `{"id":"c","messages":[{"role":"user","parts":[{"type":"file","url":"data:image/png;base64,iVBO"}]}]}`,
		"file part elsewhere": `{"id":"c","messages":[{"role":"user","parts":[{"type":"file","url":"https://example.com/files/file_1/content"}]}]}`,
		"system":              `{"id":"c","messages":[{"role":"system","parts":[{"type":"text","text":"hi"}]}]}`,
		"assistant nothing":   `{"id":"c","messages":[{"role":"assistant","parts":[{"type":"text","text":"hi"}]}]}`,
		"server output":       `{"id":"c","messages":[{"role":"assistant","parts":[{"type":"dynamic-tool","toolCallId":"s","state":"output-available","providerExecuted":true}]}]}`,
		"approval no answer":  `{"id":"c","messages":[{"role":"assistant","parts":[{"type":"dynamic-tool","toolCallId":"s","state":"approval-responded","approval":{"id":"s"}}]}]}`,
	} {
		var re *RequestError
		if _, err := parse(body); !errors.As(err, &re) {
			t.Errorf("%s: err %v, want a RequestError", name, err)
		}
	}
}

func TestParseFileParts(t *testing.T) {
	var r Request
	body := `{"id":"c","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"see"},
		{"type":"file","mediaType":"image/png","url":"/api/v1/files/file_01ab/content"},
		{"type":"file","url":"https://parley.example.com/api/v1/chats/01a2-b3/files/file_02cd/content?x=1"}]}]}`
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	a, err := r.Parse()
	if err != nil || a.Kind != ActionMessage || a.Text != "see" || len(a.FileIDs) != 2 || a.FileIDs[0] != "file_01ab" || a.FileIDs[1] != "file_02cd" {
		t.Fatalf("a message with files: %+v %v", a, err)
	}
	if err := json.Unmarshal([]byte(`{"id":"c","messages":[{"role":"user","parts":[{"type":"file","url":"/api/v1/files/file_1/content"}]}]}`), &r); err != nil {
		t.Fatal(err)
	}
	if a, err := r.Parse(); err != nil || a.Text != "" || len(a.FileIDs) != 1 {
		t.Fatalf("a file alone: %+v %v", a, err)
	}
}
