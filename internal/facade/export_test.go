package facade

import "testing"

// HoldResume has fn run as every continuation's start begins, before it
// submits its results, until the test ends.
func HoldResume(t testing.TB, fn func(chatID string)) {
	beforeResume.Store(&fn)
	t.Cleanup(func() { beforeResume.Store(nil) })
}
