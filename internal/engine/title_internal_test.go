package engine

import (
	"strings"
	"testing"
)

// A title the model wrote with a NUL or bytes that are not UTF-8 is stored
// without them (PostgreSQL's text refuses both), and only its first line.
func TestCleanTitleIsStorable(t *testing.T) {
	got := cleanTitle("\"Paris\x00 trip \xff plans.\"\nsecond line")
	if strings.ContainsRune(got, 0) || !strings.HasPrefix(got, "Paris") || strings.Contains(got, "second") {
		t.Fatalf("cleanTitle = %q", got)
	}
	if !strings.Contains(got, "\uFFFD") {
		t.Errorf("cleanTitle = %q, want the bad bytes as U+FFFD", got)
	}
}
