package mcp

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/tool"
)

// TestAnnotationsReachTheDecl: the server's annotations of each tool are in
// the tool.Decl the source lists, and so decide the tool's approval in the
// registry under the policy "destructive".
func TestAnnotationsReachTheDecl(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	yes, no := true, false
	add := func(name string, a *mcp.ToolAnnotations) {
		srv.AddTool(&mcp.Tool{Name: name, Description: name, InputSchema: objectSchema, Annotations: a},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text(""), nil })
	}
	add("read", &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no})
	add("append", &mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true})
	add("delete", &mcp.ToolAnnotations{DestructiveHint: &yes})
	add("titled", &mcp.ToolAnnotations{Title: "Only a title"})
	add("plain", nil)
	s := openMem(t, srv, Config{Name: "fs"})

	decls, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*tool.Annotations{
		"fs_read":   {ReadOnlyHint: &yes, OpenWorldHint: &no},
		"fs_append": {DestructiveHint: &no, IdempotentHint: &yes},
		"fs_delete": {DestructiveHint: &yes},
		"fs_titled": nil,
		"fs_plain":  nil,
	}
	if len(decls) != len(want) {
		t.Fatalf("tools %s", names(decls))
	}
	for _, d := range decls {
		if !d.Annotations.Equal(want[d.Name]) {
			t.Errorf("%s: annotations %+v, want %+v", d.Name, d.Annotations, want[d.Name])
		}
	}

	reg := tools.NewRegistry(testLogger(t))
	if err := reg.SetApprovalPolicy(tools.ApprovalPolicy{Sources: map[string]string{"fs": tools.ApprovalDestructive}}); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddSource(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	for name, required := range map[string]bool{"fs_read": false, "fs_append": false, "fs_delete": true, "fs_titled": true, "fs_plain": true} {
		if got := reg.RequiresApproval(name); got != required {
			t.Errorf("%s: RequiresApproval = %v, want %v", name, got, required)
		}
	}
}
