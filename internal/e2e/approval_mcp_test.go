package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/tools"
	"github.com/parleyhq/parley/internal/tools/mcp"
)

type pathArgs struct {
	Path string `json:"path"`
}

// TestMCPAnnotationsDecideApproval: an MCP server over streamable HTTP whose
// source has the policy "destructive". Its read-only tool runs at once; its
// tool annotated destructive waits in requires_action for a person, through
// the HTTP API, and runs once approved, with the edited path.
func TestMCPAnnotationsDecideApproval(t *testing.T) {
	var reads, deletes atomic.Int64
	var deleted atomic.Value
	srv := sdk.NewServer(&sdk.Implementation{Name: "files", Version: "1"}, nil)
	yes, no := true, false
	sdk.AddTool(srv, &sdk.Tool{Name: "read", Description: "reads a file", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *sdk.CallToolRequest, in pathArgs) (*sdk.CallToolResult, any, error) {
			reads.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "contents of " + in.Path}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "delete", Description: "deletes a file", Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no}},
		func(ctx context.Context, req *sdk.CallToolRequest, in pathArgs) (*sdk.CallToolResult, any, error) {
			deletes.Add(1)
			deleted.Store(in.Path)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "deleted " + in.Path}}}, nil, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	src := mcp.Open(mcp.Config{Name: "files", URL: hs.URL}, mcp.Options{})
	t.Cleanup(func() { _ = src.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := src.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}

	fake := llmtest.NewOpenAIChat(t)
	fake.Push(llmtest.Turn{ToolCalls: []llmtest.ToolCall{
		{ID: "r1", Name: "files_read", Args: `{"path":"/tmp/a"}`},
		{ID: "d1", Name: "files_delete", Args: `{"path":"/"}`},
	}}, llmtest.Turn{Text: "done"})
	s := start(t, openSQLite(t, t.TempDir()), fake, func(reg *tools.Registry) {
		if err := reg.SetApprovalPolicy(tools.ApprovalPolicy{Sources: map[string]string{"files": tools.ApprovalDestructive}}); err != nil {
			t.Fatal(err)
		}
		if err := reg.AddSource(context.Background(), src); err != nil {
			t.Fatal(err)
		}
	})
	var c chat.Chat
	if code := s.call("POST", "/api/v1/chats", map[string]any{"title": "files", "message": "clean up"}, &c); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	c = s.waitStatus(c.ID, chat.RequiresAction)
	pending := c.RequiredAction.ToolCalls
	if len(pending) != 1 || pending[0].ToolCallID != "d1" || pending[0].Kind != chat.ActionApproval || pending[0].Source != "files" {
		t.Fatalf("pending %+v", pending)
	}
	if reads.Load() != 1 || deletes.Load() != 0 {
		t.Fatalf("before the decision: %d reads, %d deletes; want the read only", reads.Load(), deletes.Load())
	}
	decision := map[string]any{"decisions": []any{map[string]any{"tool_call_id": "d1", "approve": true, "args": map[string]any{"path": "/tmp/old"}}}}
	if code := s.call("POST", "/api/v1/chats/"+c.ID+"/approvals", decision, nil); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	s.waitStatus(c.ID, chat.Waiting)
	if deletes.Load() != 1 || deleted.Load() != "/tmp/old" {
		t.Fatalf("after approval: %d deletes of %v, want one of /tmp/old", deletes.Load(), deleted.Load())
	}
	if body := string(fake.Requests()[1].Body); !strings.Contains(body, "deleted /tmp/old") || !strings.Contains(body, "contents of /tmp/a") {
		t.Fatalf("the model did not get both results: %s", body)
	}
}
