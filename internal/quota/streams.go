package quota

import "sync"

// Streams counts each owner's open event streams, to hold them to the
// owner's max_streams. The count is per replica (a stream is a connection
// to one replica, and counting it in the database would cost a write on
// every open and close): with n replicas an owner may hold up to n times
// max_streams. It is safe for concurrent use.
type Streams struct {
	mu   sync.Mutex
	open map[string]int
}

// Open counts one more stream of owner, or refuses it with a *CapError
// (Key "max_streams") when max streams are open already; max <= 0 is
// unlimited. release, which must be called once the stream ends, takes it
// off the count; calling it again does nothing.
func (s *Streams) Open(owner string, max int) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open == nil {
		s.open = map[string]int{}
	}
	if max > 0 && s.open[owner] >= max {
		return nil, &CapError{Owner: owner, Key: "max_streams", Limit: int64(max)}
	}
	s.open[owner]++
	var once sync.Once
	return func() { once.Do(func() { s.close(owner) }) }, nil
}

// Count returns how many streams of owner are open.
func (s *Streams) Count(owner string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[owner]
}

func (s *Streams) close(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[owner]--; s.open[owner] <= 0 {
		delete(s.open, owner)
	}
}
