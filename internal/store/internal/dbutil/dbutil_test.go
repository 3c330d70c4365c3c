package dbutil

import (
	"errors"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/store"
)

func TestCursorRoundTrip(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	for _, id := range []string{"a", "0f8c-uuid", "with:colons:inside"} {
		gotAt, gotID, err := DecodeCursor(EncodeCursor(at, id))
		if err != nil || !gotAt.Equal(at) || gotID != id {
			t.Fatalf("round trip of (%v, %q): (%v, %q), %v", at, id, gotAt, gotID, err)
		}
	}
}

func TestDecodeCursorRejectsGarbage(t *testing.T) {
	for _, c := range []string{"", "!!!", "Zm9v", "YzE6eDp5", "YzI6MTox", "YzE6MTo"} {
		if _, _, err := DecodeCursor(c); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("DecodeCursor(%q) = %v, want ErrBadCursor", c, err)
		}
	}
}

func TestPageLimit(t *testing.T) {
	for in, want := range map[int]int{0: DefaultPageSize, -5: 1, 1: 1, 77: 77, store.MaxPageSize: store.MaxPageSize, store.MaxPageSize + 1: store.MaxPageSize} {
		if got := PageLimit(in); got != want {
			t.Errorf("PageLimit(%d) = %d, want %d", in, got, want)
		}
	}
}
