package client

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
)

const v1 = "/api/v1"

// chatPath is the path of a chat, or of one of its sub-resources.
func chatPath(id string, sub ...string) string {
	p := v1 + "/chats/" + url.PathEscape(id)
	for _, s := range sub {
		p += "/" + s
	}
	return p
}

// Models lists the configured models; the default one is marked.
func (c *Client) Models(ctx context.Context) ([]Model, error) {
	var body struct {
		Models []Model `json:"models"`
	}
	if err := c.do(ctx, http.MethodGet, v1+"/models", nil, nil, &body); err != nil {
		return nil, err
	}
	return body.Models, nil
}

// Tools lists the server-side tools.
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	var body struct {
		Tools []Tool `json:"tools"`
	}
	if err := c.do(ctx, http.MethodGet, v1+"/tools", nil, nil, &body); err != nil {
		return nil, err
	}
	return body.Tools, nil
}

// CreateChat creates a chat: waiting, or pending with its first message.
func (c *Client) CreateChat(ctx context.Context, req CreateChatRequest) (Chat, error) {
	var ch Chat
	err := c.do(ctx, http.MethodPost, v1+"/chats", nil, req, &ch)
	return ch, err
}

// ListChats lists one page of the owner's chats, newest first.
func (c *Client) ListChats(ctx context.Context, opts ListChatsOptions) (ChatPage, error) {
	q := url.Values{}
	for _, s := range opts.Statuses {
		q.Add("status", s)
	}
	keys := make([]string, 0, len(opts.Labels))
	for k := range opts.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Add("label", k+":"+opts.Labels[k])
	}
	if opts.Archived != "" {
		q.Set("archived", opts.Archived)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	var page ChatPage
	err := c.do(ctx, http.MethodGet, v1+"/chats", q, nil, &page)
	return page, err
}

// AllChats lists every chat matching opts, following the pages.
func (c *Client) AllChats(ctx context.Context, opts ListChatsOptions) ([]Chat, error) {
	var all []Chat
	for {
		page, err := c.ListChats(ctx, opts)
		if err != nil {
			return all, err
		}
		all = append(all, page.Chats...)
		if page.NextCursor == "" {
			return all, nil
		}
		opts.Cursor = page.NextCursor
	}
}

// GetChat reads one chat.
func (c *Client) GetChat(ctx context.Context, id string) (Chat, error) {
	var ch Chat
	err := c.do(ctx, http.MethodGet, chatPath(id), nil, nil, &ch)
	return ch, err
}

// UpdateChat changes a chat's title, labels or archived flag.
func (c *Client) UpdateChat(ctx context.Context, id string, p ChatPatch) (Chat, error) {
	var ch Chat
	err := c.do(ctx, http.MethodPatch, chatPath(id), nil, p, &ch)
	return ch, err
}

// DeleteChat deletes a chat with its messages.
func (c *Client) DeleteChat(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, chatPath(id), nil, nil, nil)
}

// MessagesOption changes what ListMessages and AllMessages read.
type MessagesOption func(url.Values)

// IncludeSuperseded makes ListMessages and AllMessages read the messages an
// edit or a regeneration superseded too, in id order among the others, each
// with Superseded set; the model no longer sees them.
func IncludeSuperseded() MessagesOption {
	return func(q url.Values) { q.Set("superseded", "true") }
}

// ListMessages reads up to limit messages after the message id after (0:
// from the start; limit 0: the server's default), in id order.
func (c *Client) ListMessages(ctx context.Context, id string, after int64, limit int, opts ...MessagesOption) ([]Message, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	for _, o := range opts {
		o(q)
	}
	var body struct {
		Messages []Message `json:"messages"`
	}
	if err := c.do(ctx, http.MethodGet, chatPath(id, "messages"), q, nil, &body); err != nil {
		return nil, err
	}
	return body.Messages, nil
}

// AllMessages reads every message after the message id after.
func (c *Client) AllMessages(ctx context.Context, id string, after int64, opts ...MessagesOption) ([]Message, error) {
	const page = 500
	var all []Message
	for {
		msgs, err := c.ListMessages(ctx, id, after, page, opts...)
		if err != nil {
			return all, err
		}
		all = append(all, msgs...)
		if len(msgs) < page {
			return all, nil
		}
		after = msgs[len(msgs)-1].ID
	}
}

// PostMessage sends a user message; the answer says whether it went into
// the history or into the chat's queue.
func (c *Client) PostMessage(ctx context.Context, id string, req PostMessageRequest) (PostMessageResult, error) {
	var res PostMessageResult
	err := c.do(ctx, http.MethodPost, chatPath(id, "messages"), nil, req, &res)
	return res, err
}

// Interrupt stops what the chat is doing (see docs/api.md).
func (c *Client) Interrupt(ctx context.Context, id string) (Chat, error) {
	var ch Chat
	err := c.do(ctx, http.MethodPost, chatPath(id, "interrupt"), nil, nil, &ch)
	return ch, err
}

// Retry continues a chat in error from its persisted history.
func (c *Client) Retry(ctx context.Context, id string) (Chat, error) {
	var ch Chat
	err := c.do(ctx, http.MethodPost, chatPath(id, "retry"), nil, nil, &ch)
	return ch, err
}

// SubmitToolResults answers the open dynamic tool calls of a chat in
// requires_action, all at once. A chat in another status (someone answered
// first, the deadline passed, an interrupt) is a 409 *APIError whose
// Details["status"] names the status; missing, unknown or duplicate ids are a
// 400 naming them.
func (c *Client) SubmitToolResults(ctx context.Context, id string, results []ToolResult) (Chat, error) {
	if results == nil {
		results = []ToolResult{}
	}
	var ch Chat
	err := c.do(ctx, http.MethodPost, chatPath(id, "tool-results"), nil, map[string]any{"results": results}, &ch)
	return ch, err
}

// Decide posts the decisions on the calls of a chat in requires_action that
// wait for approval (Kind ActionApproval): one decision for each of them,
// in one call. The chat runs on once no call of either kind is pending: with
// dynamic tool calls pending too, SubmitToolResults their results as well,
// before or after.
//
// A chat with no approval pending (someone decided first, the deadline
// passed, an interrupt) is a 409 *APIError whose Details["status"] names the
// status. Missing, unknown or duplicate ids are a 400 naming them, and so
// are edited Args that do not match the tool's input schema (the message
// carries the validation error); a 400 changes nothing. Edited Args of a
// tool the server does not offer at that moment (its MCP server is
// reconnecting) are a 409 with Code "tool_unavailable": try again later, or
// decide without edits.
func (c *Client) Decide(ctx context.Context, id string, decisions []Decision) (Chat, error) {
	if decisions == nil {
		decisions = []Decision{}
	}
	var ch Chat
	err := c.do(ctx, http.MethodPost, chatPath(id, "approvals"), nil, map[string]any{"decisions": decisions}, &ch)
	return ch, err
}
