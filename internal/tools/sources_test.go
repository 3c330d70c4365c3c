package tools

import (
	"context"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/tool"
)

// remoteSource is a fakeSource that reports a state, as an MCP source does.
type remoteSource struct {
	*fakeSource
	status tool.Status
}

func (s *remoteSource) Status() tool.Status { return s.status }

func TestSourcesShowStateErrorAndToolCount(t *testing.T) {
	ctx := context.Background()
	lua := newFakeSource("lua", "l_one", "l_two")
	down := &remoteSource{fakeSource: newFakeSource("down"), status: tool.Status{State: tool.StateFailed, Error: "dial tcp: connection refused"}}
	clash := &remoteSource{fakeSource: newFakeSource("clash", "c_one"), status: tool.Status{State: tool.StateReady}}
	reg := newRegistry(t, []tool.Tool{echoTool("dice", nil)}, lua, down, clash)

	clash.setDecls(tool.Decl{Name: "l_one"}) // a new list that clashes is refused
	_ = reg.Refresh(ctx)

	got := reg.Sources()
	want := []SourceInfo{
		{Name: "lua", Status: tool.Status{State: tool.StateReady}, Tools: 2},
		{Name: "down", Status: tool.Status{State: tool.StateFailed, Error: "dial tcp: connection refused"}, Tools: 0},
		{Name: "clash", Status: tool.Status{State: tool.StateReady, Error: `tool source "clash": new tool list refused, keeping the previous one: tool "l_one": the name is already used by tool source "lua"`}, Tools: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Sources() =\n%+v\nwant\n%+v", got, want)
	}
}
