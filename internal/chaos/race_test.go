//go:build race

package chaos

func init() { raceBuild = true }
