package chat

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestToolGlobsValidate(t *testing.T) {
	lim := DefaultLimits
	many := make(ToolGlobs, lim.MaxToolGlobs+1)
	for i := range many {
		many[i] = "t*"
	}
	cases := []struct {
		name  string
		globs ToolGlobs
		field string // "" means valid
	}{
		{"nil", nil, ""},
		{"empty", ToolGlobs{}, ""},
		{"valid", ToolGlobs{"weather_*", "github_search_issues", "a?c", "[a-c]x", `x\*`}, ""},
		{"at the limits", append(make(ToolGlobs, 0), many[:lim.MaxToolGlobs]...), ""},
		{"longest", ToolGlobs{strings.Repeat("a", lim.MaxToolGlobBytes)}, ""},
		{"too many", many, "tools"},
		{"empty glob", ToolGlobs{"a", ""}, "tools[1]"},
		{"too long", ToolGlobs{strings.Repeat("a", lim.MaxToolGlobBytes+1)}, "tools[0]"},
		{"open class", ToolGlobs{"a", "b", "weather_["}, "tools[2]"},
		{"trailing backslash", ToolGlobs{`a\`}, "tools[0]"},
		{"empty class", ToolGlobs{"[]"}, "tools[0]"},
		{"NUL", ToolGlobs{"a\x00"}, "tools[0]"},
		{"bad UTF-8", ToolGlobs{"a\xff"}, "tools[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.globs.Validate("tools", lim)
			if c.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field {
				t.Fatalf("error %v, want a ValidationError of field %s", err, c.field)
			}
		})
	}
}

func TestToolGlobsMatch(t *testing.T) {
	g := ToolGlobs{"weather_*", "github_search_issues", "lua_?"}
	for name, want := range map[string]bool{
		"weather_now": true, "weather_": true, "github_search_issues": true, "lua_a": true,
		"lua_ab": false, "github_search": false, "http_fetch": false, "my_weather_now": false,
	} {
		if got := g.Match(name); got != want {
			t.Errorf("Match(%q) = %v, want %v", name, got, want)
		}
	}
	if (ToolGlobs{}).Match("a") || ToolGlobs(nil).Match("a") {
		t.Error("an empty list matches nothing")
	}
	if !ToolGlobs(nil).Selects("a") || (ToolGlobs{}).Selects("a") || !g.Selects("weather_x") || g.Selects("x") {
		t.Error("Selects: nil takes every tool, [] none, else the matched ones")
	}
	if got := g.Unmatched([]string{"weather_now", "http_fetch"}); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("Unmatched = %v, want [1 2]", got)
	}
}
