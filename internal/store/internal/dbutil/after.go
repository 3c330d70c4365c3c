package dbutil

// RunAfterOne runs one transaction's AfterCommit functions (store.Tx) in
// order and returns the panic of the one that panicked, if any.
func RunAfterOne(fns []func()) (panicked any) {
	defer func() { panicked = recover() }()
	for _, fn := range fns {
		fn()
	}
	return nil
}
