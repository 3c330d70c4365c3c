package poll

import (
	"testing"
	"time"
)

// The pauses double from First and stop growing at Max.
func TestBackoffGrowsToMax(t *testing.T) {
	var b Backoff
	var got []time.Duration
	for range 8 {
		got = append(got, b.next())
	}
	want := []time.Duration{1, 2, 4, 8, 16, 20, 20, 20}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("pauses %v, want %v ms", got, want)
		}
	}
}
