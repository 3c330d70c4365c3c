package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeCapsToolResults: tools.max_result_bytes reaches the engine's
// dispatcher. A Lua tool's result of 1,000,000 bytes is stored cut to the
// configured 100, with the marker and the full size, and the model (echo,
// which repeats the results it is given) sees the marker.
func TestServeCapsToolResults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "big.lua")
	lua := `tool{name = "big", description = "a huge result", handler = function(input) return string.rep("x", 1000000) end}`
	if err := os.WriteFile(script, []byte(lua), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "parley.yaml")
	cfg := "tools:\n  max_result_bytes: 100\n  lua:\n    - {name: big, path: " + script + "}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, nil, "--config", path, "--data-dir", filepath.Join(dir, "data"))

	p := startChat(t, dir, nil, "--url", s.URL, "--token", s.Token)
	p.send("/call big {}")
	p.waitFor(p.stdout, "tool big returned "+strings.Repeat("x", 100)+"\n[… truncated: 1,000,000 bytes, showing the first 100]\n")
	if code := p.wait(); code != 0 {
		t.Fatalf("chat exited %d at the end of input\nstderr:\n%s", code, p.stderr)
	}
	m := chatIDLine.FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no chat id in stderr:\n%s", p.stderr)
	}

	code, body := get(t, s.URL+"/api/v1/chats/"+m[1]+"/messages", s.Token)
	var page struct {
		Messages []struct {
			Parts []struct {
				Type        string `json:"type"`
				Output      string `json:"output"`
				OutputBytes int64  `json:"output_bytes"`
				Truncated   bool   `json:"truncated"`
			} `json:"parts"`
		} `json:"messages"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("messages: %d %.300s", code, body)
	}
	var found bool
	for _, msg := range page.Messages {
		for _, part := range msg.Parts {
			if part.Type != "tool-result" {
				continue
			}
			found = true
			want := strings.Repeat("x", 100) + "\n[… truncated: 1,000,000 bytes, showing the first 100]"
			if part.Output != want || part.OutputBytes != 1000000 || !part.Truncated {
				t.Errorf("result: output %q, output_bytes %d, truncated %v; want %q, 1000000, true", part.Output, part.OutputBytes, part.Truncated, want)
			}
		}
	}
	if !found {
		t.Fatalf("no tool result in the history: %.500s", body)
	}
}
