//go:build !unix

package sqlite

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("lock would block")

// tryLock is a no-op where flock does not exist: the single-process rule is
// not enforced there.
func tryLock(*os.File) error { return nil }
