package builtin

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// invoke calls t with args and decodes its output into a map (or, for an
// error result, returns the message as "error").
func invoke(t *testing.T, tl tool.Tool, args string) map[string]any {
	t.Helper()
	res, err := tl.Invoke(context.Background(), tool.Call{ID: "c1", Name: tl.Decl().Name, Args: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("Invoke(%s): %v", args, err)
	}
	if res.IsError {
		var msg string
		if err := json.Unmarshal(res.Output, &msg); err != nil {
			t.Fatalf("error output %s is not a JSON string", res.Output)
		}
		return map[string]any{"error": msg}
	}
	var out map[string]any
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return out
}

// TestToolsRegister: the built-in declarations are valid and their schemas
// compile in the registry.
func TestToolsRegister(t *testing.T) {
	reg := tools.NewRegistry(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, tl := range Tools(Options{}) {
		if err := reg.AddTool(tl); err != nil {
			t.Fatal(err)
		}
	}
	if !reg.Has("current_time") || !reg.Has("http_fetch") {
		t.Fatal("built-in tools missing")
	}
}

// TestToolsAreReadOnly: both built-in tools are annotated read-only, so the
// policy "destructive" lets them run without approval.
func TestToolsAreReadOnly(t *testing.T) {
	reg := tools.NewRegistry(slog.New(slog.DiscardHandler))
	if err := reg.SetApprovalPolicy(tools.ApprovalPolicy{Rules: []tools.ApprovalRule{{Match: "*", Approval: tools.ApprovalDestructive}}}); err != nil {
		t.Fatal(err)
	}
	for _, tl := range Tools(Options{}) {
		a := tl.Decl().Annotations
		if a == nil || a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
			t.Errorf("%s: annotations %+v, want readOnlyHint true, destructiveHint false", tl.Decl().Name, a)
		}
		if err := reg.AddTool(tl); err != nil {
			t.Fatal(err)
		}
		if reg.RequiresApproval(tl.Decl().Name) {
			t.Errorf("%s needs approval under destructive", tl.Decl().Name)
		}
	}
}

func TestCurrentTime(t *testing.T) {
	fixed := time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)
	ct := currentTime{now: func() time.Time { return fixed }}
	cases := []struct {
		args, time, zone, err string
	}{
		{`{}`, "2026-01-15T12:00:00Z", "UTC", ""},
		{`{"timezone":"Asia/Tokyo"}`, "2026-01-15T21:00:00+09:00", "Asia/Tokyo", ""},
		{`{"timezone":"America/New_York"}`, "2026-01-15T07:00:00-05:00", "America/New_York", ""},
		{`{"timezone":"Mars/Olympus_Mons"}`, "", "", `unknown time zone "Mars/Olympus_Mons"`},
		{`{"timezone":"Local"}`, "", "", `unknown time zone "Local"`},
	}
	for _, tc := range cases {
		out := invoke(t, ct, tc.args)
		if tc.err != "" {
			if msg, _ := out["error"].(string); len(msg) < len(tc.err) || msg[:len(tc.err)] != tc.err {
				t.Errorf("%s: got %v, want error %q", tc.args, out, tc.err)
			}
			continue
		}
		if out["time"] != tc.time || out["timezone"] != tc.zone || out["unix"] != float64(fixed.Unix()) {
			t.Errorf("%s: got %v, want time %s zone %s unix %d", tc.args, out, tc.time, tc.zone, fixed.Unix())
		}
	}
}
