//go:build race

package browsertest

func init() { buildFlags = append(buildFlags, "-race") }
