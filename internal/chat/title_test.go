package chat

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFallbackTitle(t *testing.T) {
	long := "What is the weather in Paris today, and should I take an umbrella with me tomorrow morning?"
	cases := []struct {
		name string
		in   []Part
		want string
	}{
		{"short", []Part{TextPart("  Hello\n  world ")}, "Hello world"},
		{"parts joined", []Part{TextPart("a"), TextPart("b")}, "a b"},
		{"cut on a word", []Part{TextPart(long)}, "What is the weather in Paris today, and should I take an…"},
		{"one long word", []Part{TextPart(strings.Repeat("x", 70))}, strings.Repeat("x", 60) + "…"},
		{"cut before a space", []Part{TextPart(strings.Repeat("y", 60) + " more")}, strings.Repeat("y", 60) + "…"},
	}
	for _, tc := range cases {
		if got := FallbackTitle(tc.in, 200); got != tc.want {
			t.Errorf("%s: FallbackTitle = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Wide characters: 60 runes of 4 bytes exceed a 200-byte title.
	wide := FallbackTitle([]Part{TextPart(strings.Repeat("😀", 70))}, 200)
	if len(wide) > 200 || !utf8.ValidString(wide) || !strings.HasSuffix(wide, "…") {
		t.Errorf("wide title %q (%d bytes): want valid UTF-8 of at most 200 bytes ending in …", wide, len(wide))
	}
}
