package tools

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/tool"
)

// deadline bounds every wait of these tests, so a broken dispatcher fails
// them instead of hanging.
const deadline = 5 * time.Second

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// barrier completes when n parties are inside it at the same time.
type barrier struct {
	wg   sync.WaitGroup
	done chan struct{}
}

func newBarrier(n int) *barrier {
	b := &barrier{done: make(chan struct{})}
	b.wg.Add(n)
	go func() { b.wg.Wait(); close(b.done) }()
	return b
}

// arrive enters the barrier and waits for every other party; it reports
// false if they did not all arrive before the deadline.
func (b *barrier) arrive() bool {
	b.wg.Done()
	select {
	case <-b.done:
		return true
	case <-time.After(deadline):
		return false
	}
}

const objectSchema = `{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`

// echoTool answers {"tool": name, "args": args}, after running before (if set).
func echoTool(name string, before func(ctx context.Context) error) tool.Tool {
	return tool.Func(tool.Decl{Name: name, Description: "echo", InputSchema: json.RawMessage(objectSchema)},
		func(ctx context.Context, c tool.Call) (tool.Result, error) {
			if before != nil {
				if err := before(ctx); err != nil {
					return tool.Result{}, err
				}
			}
			return tool.JSON(map[string]any{"tool": c.Name, "args": c.Args, "chat": c.ChatID}), nil
		})
}

// fakeSource is a Source whose list and behaviour tests control. It records
// every batch it receives.
type fakeSource struct {
	name   string
	invoke func(ctx context.Context, calls []tool.Call) ([]tool.Result, error)

	mu      sync.Mutex
	decls   []tool.Decl
	listErr error
	batches [][]tool.Call
	closed  bool
}

func newFakeSource(name string, tools ...string) *fakeSource {
	s := &fakeSource{name: name}
	for _, t := range tools {
		s.decls = append(s.decls, tool.Decl{Name: t, Description: "from " + name, InputSchema: json.RawMessage(objectSchema)})
	}
	return s
}

func (s *fakeSource) Name() string { return s.name }

func (s *fakeSource) Tools(ctx context.Context) ([]tool.Decl, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.decls), s.listErr
}

func (s *fakeSource) setDecls(decls ...tool.Decl) {
	s.mu.Lock()
	s.decls = decls
	s.mu.Unlock()
}

func (s *fakeSource) InvokeBatch(ctx context.Context, calls []tool.Call) ([]tool.Result, error) {
	s.mu.Lock()
	s.batches = append(s.batches, slices.Clone(calls))
	s.mu.Unlock()
	if s.invoke != nil {
		return s.invoke(ctx, calls)
	}
	return sourceEcho(s.name, calls), nil
}

func sourceEcho(name string, calls []tool.Call) []tool.Result {
	out := make([]tool.Result, len(calls))
	for i, c := range calls {
		out[i] = tool.JSON(map[string]any{"source": name, "tool": c.Name, "args": c.Args})
	}
	return out
}

func (s *fakeSource) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *fakeSource) recorded() [][]tool.Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches)
}

// call builds a tool call with id and name and the args {"x": x}.
func call(id, name string, x int) chat.ToolCall {
	args, _ := json.Marshal(map[string]int{"x": x})
	return chat.ToolCall{ToolCallID: id, ToolName: name, Args: args}
}

// ids lists the ids of results or calls.
func resultIDs(parts []chat.Part) []string {
	var ids []string
	for _, p := range parts {
		ids = append(ids, p.ToolCallID)
	}
	return ids
}

func callIDs(calls []tool.Call) []string {
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.ID)
	}
	return ids
}

// resultByID finds the result of a call or fails the test.
func resultByID(t *testing.T, parts []chat.Part, id string) chat.Part {
	t.Helper()
	for _, p := range parts {
		if p.ToolCallID == id {
			return p
		}
	}
	t.Fatalf("no result for call %s in %v", id, resultIDs(parts))
	return chat.Part{}
}

// errorText returns the message of an error result, failing the test if the
// part is not one.
func errorText(t *testing.T, p chat.Part) string {
	t.Helper()
	if !p.IsError {
		t.Fatalf("result of %s is not an error: %s", p.ToolCallID, p.Output)
	}
	var s string
	if err := json.Unmarshal(p.Output, &s); err != nil {
		t.Fatalf("error output of %s is not a JSON string: %s", p.ToolCallID, p.Output)
	}
	return s
}

func newRegistry(t *testing.T, tools []tool.Tool, sources ...tool.Source) *Registry {
	t.Helper()
	r := NewRegistry(discard())
	for _, tl := range tools {
		if err := r.AddTool(tl); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sources {
		if err := r.AddSource(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return r
}
