package dbutil

import "github.com/parleyhq/parley/internal/store"

// DefaultPageSize is the page size of a query that sets no limit (0).
const DefaultPageSize = 50

// PageLimit clamps a requested page size to 1..store.MaxPageSize; 0 means
// DefaultPageSize.
func PageLimit(n int) int {
	switch {
	case n == 0:
		return DefaultPageSize
	case n < 1:
		return 1
	case n > store.MaxPageSize:
		return store.MaxPageSize
	}
	return n
}
