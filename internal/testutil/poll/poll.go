// Package poll paces the polling loops of tests that wait for a state they
// cannot be told about: the first looks come quickly, later ones back off,
// so a long wait does not spin on the two cores a test run shares.
package poll

import "time"

// First and Max bound a Backoff's pauses.
const (
	First = time.Millisecond
	Max   = 20 * time.Millisecond
)

// Backoff is a polling loop's pause: First, then twice the last, up to Max.
// The zero value is ready to use; it is not safe for concurrent use.
type Backoff struct{ last time.Duration }

// Sleep pauses for the next interval.
func (b *Backoff) Sleep() { time.Sleep(b.next()) }

// next is the next interval.
func (b *Backoff) next() time.Duration {
	b.last = min(max(2*b.last, First), Max)
	return b.last
}
