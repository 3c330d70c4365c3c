package service

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/chat"
)

func TestFallbackTitle(t *testing.T) {
	long := "What is the weather in Paris today, and should I take an umbrella with me tomorrow morning?"
	cases := []struct {
		name string
		in   []chat.Part
		want string
	}{
		{"short", []chat.Part{chat.TextPart("  Hello\n  world ")}, "Hello world"},
		{"parts joined", []chat.Part{chat.TextPart("a"), chat.TextPart("b")}, "a b"},
		{"cut on a word", []chat.Part{chat.TextPart(long)}, "What is the weather in Paris today, and should I take an…"},
		{"one long word", []chat.Part{chat.TextPart(strings.Repeat("x", 70))}, strings.Repeat("x", 60) + "…"},
		{"cut before a space", []chat.Part{chat.TextPart(strings.Repeat("y", 60) + " more")}, strings.Repeat("y", 60) + "…"},
	}
	for _, tc := range cases {
		if got := FallbackTitle(tc.in, 200); got != tc.want {
			t.Errorf("%s: FallbackTitle = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Wide characters: 60 runes of 4 bytes exceed a 200-byte title.
	wide := FallbackTitle([]chat.Part{chat.TextPart(strings.Repeat("😀", 70))}, 200)
	if len(wide) > 200 || !utf8.ValidString(wide) || !strings.HasSuffix(wide, "…") {
		t.Errorf("wide title %q (%d bytes): want valid UTF-8 of at most 200 bytes ending in …", wide, len(wide))
	}
}
