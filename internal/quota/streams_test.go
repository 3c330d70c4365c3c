package quota_test

import (
	"errors"
	"testing"

	"github.com/parleyhq/parley/internal/quota"
)

func TestStreamsCap(t *testing.T) {
	var s quota.Streams
	r1, err := s.Open("alice", 2)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Open("alice", 2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Open("alice", 2)
	var ce *quota.CapError
	if !errors.As(err, &ce) || ce.Key != "max_streams" || ce.Limit != 2 || ce.Owner != "alice" {
		t.Fatalf("third stream: %v, want a max_streams CapError of 2", err)
	}
	if _, err := s.Open("bob", 2); err != nil {
		t.Fatalf("another owner: %v", err)
	}
	r1()
	r1() // twice is once
	if n := s.Count("alice"); n != 1 {
		t.Fatalf("%d open after one release, want 1", n)
	}
	if _, err := s.Open("alice", 2); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	r2()
	if _, err := s.Open("alice", 0); err != nil {
		t.Fatalf("unlimited: %v", err)
	}
}
