package client

import (
	"context"
	"net/http"
	"strconv"
)

// Compact asks for a compaction of a waiting chat's history, or of one in
// error: the answer is the chat, pending; its run writes an assistant
// message whose only part is a PartCompaction summarising everything before
// the last turn, and the chat waits again. A chat with nothing to summarise
// (one turn or none since the last compaction) is a 409 *APIError with Code
// "nothing_to_compact"; a chat in another status, or with messages queued,
// a 409 "status_conflict".
func (c *Client) Compact(ctx context.Context, id string) (Chat, error) {
	var ch Chat
	err := c.do(ctx, http.MethodPost, chatPath(id, "compact"), nil, nil, &ch)
	return ch, err
}

// EditMessage writes a new version of the user message messageID with
// content (a string, or []Part of text parts, as
// PostMessageRequest.Content) and sets the chat pending to answer it; the
// message and every one after it are superseded (see IncludeSuperseded and
// MessageVersions), and the new version is a message of its own, with a
// new id, in their place. Only a user message can be edited (else a 400
// "not_a_user_message"); an unknown or superseded id is a 404
// "message_not_found"; the chat must be waiting or in error with nothing
// queued (else a 409 "status_conflict").
func (c *Client) EditMessage(ctx context.Context, id string, messageID int64, content any) (Chat, error) {
	var ch Chat
	path := chatPath(id, "messages", strconv.FormatInt(messageID, 10))
	err := c.do(ctx, http.MethodPatch, path, nil, map[string]any{"content": content}, &ch)
	return ch, err
}

// MessageVersions returns the versions of message messageID of chat id,
// oldest first: the earlier ones an edit or a regeneration superseded, and
// the later ones, the one in the history among them (Superseded false;
// none if the message's own parent was superseded). A compaction's only
// version is itself. An unknown id is a 404 "message_not_found".
func (c *Client) MessageVersions(ctx context.Context, id string, messageID int64) ([]Message, error) {
	var out struct {
		Versions []Message `json:"versions"`
	}
	err := c.do(ctx, http.MethodGet, chatPath(id, "messages", strconv.FormatInt(messageID, 10), "versions"), nil, nil, &out)
	return out.Versions, err
}

// Regenerate supersedes everything after the chat's last user message and
// sets the chat pending to answer it again. The status rules are those of
// EditMessage.
func (c *Client) Regenerate(ctx context.Context, id string) (Chat, error) {
	var ch Chat
	err := c.do(ctx, http.MethodPost, chatPath(id, "regenerate"), nil, nil, &ch)
	return ch, err
}

// Fork creates a chat like chat id (its model, system prompt, tools,
// approvals, dynamic tools and labels, with the label LabelForkedFrom set to
// id) holding a copy of its history up to and including messageID, and
// returns it: pending to answer that message when it is a user message,
// else waiting. The original does not change. A messageID between a tool
// call and its results is a 400 *APIError with Code "fork_inside_step"; an
// unknown one a 404 "message_not_found".
func (c *Client) Fork(ctx context.Context, id string, messageID int64) (Chat, error) {
	var ch Chat
	err := c.do(ctx, http.MethodPost, chatPath(id, "fork"), nil, map[string]int64{"message_id": messageID}, &ch)
	return ch, err
}

// LabelForkedFrom is the label of a forked chat that names the chat it was
// forked from.
const LabelForkedFrom = "forked_from"
