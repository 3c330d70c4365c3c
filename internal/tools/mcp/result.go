package mcp

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/tool"
)

// output is the JSON shape of a call's result beyond a single text (see the
// package documentation).
type output struct {
	Content    []contentItem `json:"content"`
	Structured any           `json:"structured,omitempty"`
}

// contentItem is one content block of a result, its fields by type; empty
// ones are left out.
type contentItem struct {
	Type        string `json:"type"`
	Text        string `json:"text,omitempty"`
	URI         string `json:"uri,omitempty"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
	Data        []byte `json:"data,omitempty"` // base64 in JSON
	Blob        []byte `json:"blob,omitempty"` // base64 in JSON
}

// toResult maps an MCP tool result to parley's: a lone text block without
// structured content becomes that text as a JSON string, anything else the
// {"content": [...], "structured": ...} object. isError carries over.
func toResult(res *mcp.CallToolResult) tool.Result {
	var r tool.Result
	if len(res.Content) == 1 && res.StructuredContent == nil {
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			r = tool.Text(t.Text)
			r.IsError = res.IsError
			return r
		}
	}
	out := output{Content: make([]contentItem, 0, len(res.Content)), Structured: res.StructuredContent}
	for _, c := range res.Content {
		out.Content = append(out.Content, toItem(c))
	}
	b, err := json.Marshal(out)
	if err != nil {
		return tool.Errorf("encode the MCP tool's result: %v", err)
	}
	return tool.Result{Output: b, IsError: res.IsError}
}

func toItem(c mcp.Content) contentItem {
	switch c := c.(type) {
	case *mcp.TextContent:
		return contentItem{Type: "text", Text: c.Text}
	case *mcp.ImageContent:
		return contentItem{Type: "image", MIMEType: c.MIMEType, Data: c.Data}
	case *mcp.AudioContent:
		return contentItem{Type: "audio", MIMEType: c.MIMEType, Data: c.Data}
	case *mcp.ResourceLink:
		return contentItem{Type: "resource_link", URI: c.URI, Name: c.Name, Title: c.Title, Description: c.Description, MIMEType: c.MIMEType}
	case *mcp.EmbeddedResource:
		item := contentItem{Type: "resource"}
		if r := c.Resource; r != nil {
			item.URI, item.MIMEType, item.Text, item.Blob = r.URI, r.MIMEType, r.Text, r.Blob
		}
		return item
	}
	// Other block types (tool_use, tool_result) belong to sampling, not to
	// tool results; keep their JSON so nothing is lost.
	b, _ := json.Marshal(c)
	var probe struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(b, &probe)
	return contentItem{Type: probe.Type, Text: string(b)}
}
