package facade

import "testing"

// HoldResume has fn run as the start of every continuation that answers
// calls begins, of either API, before it submits its results, until the
// test ends.
func HoldResume(t testing.TB, fn func(chatID string)) {
	beforeResume.Store(&fn)
	t.Cleanup(func() { beforeResume.Store(nil) })
}
