package chat

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// ToolGlobs is a list of glob patterns over tool names, in the syntax of
// path.Match: "*" matches any run of characters but "/", "?" one character,
// "[...]" one character of a class ("[^...]" or "[!...]" one not in it),
// and "\" quotes the character after it. A chat's "tools" is one: it
// selects the server-side tools the chat's model is offered (Selects); the
// chat's dynamic tools are offered whatever it says.
type ToolGlobs []string

// Validate checks the globs against the limits (at most lim.MaxToolGlobs,
// each 1..lim.MaxToolGlobBytes bytes of valid UTF-8 without NUL) and the
// glob syntax. field names the list in errors: "tools" gives "tools[2]".
func (g ToolGlobs) Validate(field string, lim Limits) error {
	if len(g) > lim.MaxToolGlobs {
		return invalid(field, "at most %d globs, got %d", lim.MaxToolGlobs, len(g))
	}
	for i, p := range g {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case p == "":
			return invalid(f, "must not be empty")
		case len(p) > lim.MaxToolGlobBytes:
			return invalid(f, "is %d bytes, at most %d allowed", len(p), lim.MaxToolGlobBytes)
		case !utf8.ValidString(p):
			return invalid(f, "must be valid UTF-8")
		case strings.ContainsRune(p, 0):
			return invalid(f, "%s", noNUL)
		}
		if _, err := path.Match(p, ""); err != nil {
			return invalid(f, "%q is not a valid glob (%v); use *, ? and [...] as in path.Match", p, err)
		}
	}
	return nil
}

// Match reports whether any of the globs matches name; none does when the
// list is empty. A malformed glob matches nothing.
func (g ToolGlobs) Match(name string) bool {
	for _, p := range g {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Unmatched returns the indexes of the globs that match none of names.
func (g ToolGlobs) Unmatched(names []string) []int {
	var out []int
	for i, p := range g {
		if !slices.ContainsFunc(names, ToolGlobs{p}.Match) {
			out = append(out, i)
		}
	}
	return out
}

// Selects reports whether a tool selection (a chat's "tools") takes the
// server-side tool name: every tool when the selection is nil (the chat
// did not narrow them), else the tools one of its globs matches; an empty
// selection takes none.
func (g ToolGlobs) Selects(name string) bool { return g == nil || g.Match(name) }
