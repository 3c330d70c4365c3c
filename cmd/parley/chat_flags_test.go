package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestParseTools: --tool NAME=FILE[:DESCRIPTION] gives the tool its schema
// from FILE and the description after the colon that follows the file name;
// a file whose name holds that colon is the file; a malformed value is a
// usage error.
func TestParseTools(t *testing.T) {
	dir := t.TempDir()
	schema := `{"type":"object"}`
	plain, colon := filepath.Join(dir, "weather.json"), filepath.Join(dir, "odd:name.json")
	for _, p := range []string{plain, colon} {
		if err := os.WriteFile(p, []byte(schema), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tools, err := parseTools("parley chat", []string{
		"get_weather=" + plain + ":Current weather: for a city",
		"plain=" + plain,
		"odd=" + colon,
	})
	if err != nil || len(tools) != 3 {
		t.Fatalf("parseTools: %+v, %v", tools, err)
	}
	for i, want := range [][2]string{{"get_weather", "Current weather: for a city"}, {"plain", ""}, {"odd", ""}} {
		if tools[i].Name != want[0] || tools[i].Description != want[1] || string(tools[i].InputSchema) != schema {
			t.Errorf("tool %d: %+v, want %q described %q", i, tools[i], want[0], want[1])
		}
	}
	var ue *usageError
	if _, err := parseTools("parley chat", []string{"get_weather"}); !errors.As(err, &ue) {
		t.Errorf("no FILE: %v, want a usage error", err)
	}
}
