package memory_test

import (
	"errors"
	"testing"

	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/pubsub/pubsubtest"
)

func TestConformance(t *testing.T) {
	pubsubtest.Run(t, func(t *testing.T) pubsub.PubSub {
		ps := memory.New()
		t.Cleanup(func() { ps.Close() })
		return ps
	})
}

// TestBufferSize checks that the option bounds each subscription's buffer.
func TestBufferSize(t *testing.T) {
	ps := memory.New(memory.WithBufferSize(3))
	defer ps.Close()
	sub, err := ps.Subscribe(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := ps.Publish(t.Context(), "t", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("Err with a full buffer = %v, want nil", err)
	}
	if err := ps.Publish(t.Context(), "t", []byte("overflow")); err != nil {
		t.Fatal(err)
	}
	if err := sub.Err(); !errors.Is(err, pubsub.ErrLagged) {
		t.Fatalf("Err after overflow = %v, want ErrLagged", err)
	}
}
