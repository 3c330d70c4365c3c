package tools

import (
	"context"
	"fmt"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/tool"
)

// BenchmarkRunStep measures the dispatch overhead of one step of 100 calls
// spread over two sources and ten single Tools that all answer at once.
func BenchmarkRunStep(b *testing.B) {
	var singles []tool.Tool
	for i := range 10 {
		singles = append(singles, echoTool(fmt.Sprint("t", i), nil))
	}
	reg := NewRegistry(discard())
	for _, tl := range singles {
		if err := reg.AddTool(tl); err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range []*fakeSource{newFakeSource("a", "a0", "a1"), newFakeSource("b", "b0", "b1")} {
		if err := reg.AddSource(context.Background(), s); err != nil {
			b.Fatal(err)
		}
	}
	names := []string{"a0", "b0", "t0", "t1", "a1", "t2", "t3", "b1", "t4", "t5"}
	var calls []chat.ToolCall
	for i := range 100 {
		calls = append(calls, call(fmt.Sprint("c", i), names[i%len(names)], i))
	}
	d := NewDispatcher(reg, Options{}, discard())
	b.ResetTimer()
	for b.Loop() {
		out := d.Run(context.Background(), Step{ChatID: "bench", Calls: calls})
		if len(out.Results) != len(calls) {
			b.Fatal("missing results")
		}
	}
}
