package chat

import (
	"strings"
	"unicode/utf8"
)

// fallbackTitleRunes is the length a first message is cut to when it serves
// as the title.
const fallbackTitleRunes = 60

// FallbackTitle makes a title of a first message: its text (without any,
// the names of its files) with white space collapsed, cut on a word
// boundary to about 60 characters (and at most maxBytes bytes), with "…"
// when cut.
func FallbackTitle(parts []Part, maxBytes int) string {
	var words, names []string
	for _, p := range parts {
		switch p.Type {
		case PartText:
			words = append(words, strings.Fields(p.Text)...)
		case PartFile:
			names = append(names, strings.Fields(p.Name)...)
		}
	}
	if len(words) == 0 {
		words = names
	}
	text := strings.Join(words, " ")
	if utf8.RuneCountInString(text) <= fallbackTitleRunes && len(text) <= maxBytes {
		return text
	}
	const ellipsis = "…"
	cut := []rune(text)[:min(fallbackTitleRunes, utf8.RuneCountInString(text))]
	for len(string(cut))+len(ellipsis) > maxBytes && len(cut) > 0 {
		cut = cut[:len(cut)-1]
	}
	short := string(cut)
	midWord := !strings.HasPrefix(text[len(short):], " ")
	if i := strings.LastIndexByte(short, ' '); midWord && i > 0 {
		short = short[:i]
	}
	return strings.TrimRight(short, " ,.;:") + ellipsis
}
