package chatcli

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
)

// TestChatStatusLabels: the status line says what the chat waits for once
// this session has asked about every call, and shows a call's progress.
func TestChatStatusLabels(t *testing.T) {
	approval := client.ToolCall{ToolCallID: "a", ToolName: "http_fetch", Kind: client.ActionApproval}
	result := client.ToolCall{ToolCallID: "r", ToolName: "get_weather"}
	for _, c := range []struct {
		name            string
		calls           []client.ToolCall
		asked, answered map[string]bool
		want            string
	}{
		{"approval to ask here", []client.ToolCall{approval}, nil, nil, ""},
		{"approval asked, not decided", []client.ToolCall{approval}, map[string]bool{"a": true}, nil, "waiting for approval"},
		{"result asked", []client.ToolCall{result}, map[string]bool{"r": true}, nil, "waiting for tool results"},
		{"both asked", []client.ToolCall{result, approval}, map[string]bool{"a": true, "r": true}, nil, "waiting for approval"},
		{"one still to ask", []client.ToolCall{result, approval}, map[string]bool{"a": true}, nil, ""},
		{"all answered", []client.ToolCall{result}, map[string]bool{"r": true}, map[string]bool{"r": true}, ""},
	} {
		if got := waitingLabel(c.calls, c.asked, c.answered); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		p    client.Delta
		want string
	}{
		{client.Delta{ToolName: "everything_slow", Progress: 3, Total: 10, Message: "step 3"}, "everything_slow: step 3 (3/10)"},
		{client.Delta{ToolName: "everything_slow", Progress: 0.25, Total: 1}, "everything_slow: 25%"},
		{client.Delta{ToolName: "everything_slow", Progress: 7}, "everything_slow: 7"},
		{client.Delta{ToolName: "everything_slow", Message: "starting"}, "everything_slow: starting"},
		{client.Delta{ToolName: "everything_slow"}, "calling everything_slow"},
	} {
		if got := progressLabel(c.p); got != c.want {
			t.Errorf("progressLabel(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

// TestChatDeadlineText: a deadline is shown as a local time (with the date
// when it is not today) and how long is left.
func TestChatDeadlineText(t *testing.T) {
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.Local)
	for _, c := range []struct {
		deadline time.Time
		want     string
	}{
		{now.Add(10 * time.Minute), "10:10:00, 10m0s left"},
		{now.Add(90*time.Second + 400*time.Millisecond), "10:01:30, 1m30s left"},
		{now.Add(-time.Second), "09:59:59, passed"},
		{now.Add(24 * time.Hour), "Mar 5 10:00:00, 24h0m0s left"},
		{now.Add(time.Hour).UTC(), "11:00:00, 1h0m0s left"},
	} {
		if got := deadlineText(c.deadline, now); got != c.want {
			t.Errorf("deadlineText(%s) = %q, want %q", c.deadline, got, c.want)
		}
	}
}

// TestChatStatusLine: on a terminal the status line shows a spinner and its
// label, and anything written through the session's writers erases it
// first; off a terminal it writes nothing.
func TestChatStatusLine(t *testing.T) {
	var term bytes.Buffer
	l := newStatusLine(&term, true)
	out := clearing{l, &term}
	l.start("the model is working")
	l.clear()
	l.clear() // nothing more: it no longer shows
	l.start("waiting for the model")
	fmt.Fprint(out, "echo")
	if got, want := term.String(), "\r⠋ the model is working…\r\033[K\r⠋ waiting for the model…\r\033[Kecho"; got != want {
		t.Errorf("terminal %q, want %q", got, want)
	}

	var plain bytes.Buffer
	l = newStatusLine(&plain, false)
	l.start("the model is working")
	fmt.Fprint(clearing{l, &plain}, "echo")
	l.clear()
	if plain.String() != "echo" {
		t.Errorf("not a terminal: %q, want only the output", plain.String())
	}
}

// TestNoToken: a session given no token, and no admin token file to read
// one from, says so before it calls the server.
func TestNoToken(t *testing.T) {
	var out bytes.Buffer
	err := Run(t.Context(), Options{URL: "http://127.0.0.1:1", Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}, []string{"hi"})
	if err == nil || err.Error() != "no token: pass --token or set PARLEY_TOKEN" || out.Len() != 0 {
		t.Fatalf("Run: %v, output %q", err, out.String())
	}
}
