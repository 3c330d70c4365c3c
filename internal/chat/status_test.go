package chat

import "testing"

// TestTransitionTable walks every pair of statuses, creation (New) among
// the sources, and checks it against the table of docs/architecture.md,
// written out here a second time on purpose.
func TestTransitionTable(t *testing.T) {
	legal := map[[2]Status]bool{
		{New, Waiting}:            true,
		{New, Pending}:            true,
		{Waiting, Pending}:        true,
		{Pending, Running}:        true,
		{Pending, Waiting}:        true,
		{Running, Running}:        true,
		{Running, Waiting}:        true,
		{Running, Pending}:        true,
		{Running, RequiresAction}: true,
		{Running, Error}:          true,
		{RequiresAction, Pending}: true,
		{RequiresAction, Waiting}: true,
		{Error, Pending}:          true,
	}
	for _, from := range append([]Status{New}, Statuses...) {
		for _, to := range append([]Status{New}, Statuses...) {
			if got, want := CanTransition(from, to), legal[[2]Status{from, to}]; got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	if CanTransition("bogus", Pending) || CanTransition(Pending, "bogus") {
		t.Error("unknown statuses must never transition")
	}
}

func TestBusy(t *testing.T) {
	for s, want := range map[Status]bool{Waiting: false, Error: false, Pending: true, Running: true, RequiresAction: true} {
		if s.Busy() != want {
			t.Errorf("%s.Busy() = %v", s, !want)
		}
	}
}
