package main

import (
	"runtime/debug"
	"testing"
)

// TestVersionOf: a tagged module version wins; a checkout build shows its
// commit, its time and whether the tree was dirty; nothing known is devel.
func TestVersionOf(t *testing.T) {
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-01T21:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"devel 0123456789ab 2026-12-01T21:00:00Z+dirty"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
	} {
		if got := versionOf(&c.bi); got != c.want {
			t.Errorf("versionOf(%+v) = %q, want %q", c.bi.Main, got, c.want)
		}
	}
}
