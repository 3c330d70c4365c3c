package facade

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// conversationKey digests what identifies a Chat Completions conversation
// at one point: the request's user, its system prompt and its messages, as
// parley reads them (a message's content as a string or as parts, a call's
// arguments with or without spaces, are alike). A chat holds the key of
// the request its run started from; the request that answers the run's
// calls sends that request's messages again, before the calls.
func conversationKey(user, system string, history []chat.Message) string {
	type part struct {
		Type   string          `json:"t"`
		Text   string          `json:"x,omitempty"`
		ID     string          `json:"i,omitempty"`
		Name   string          `json:"n,omitempty"`
		Args   json.RawMessage `json:"a,omitempty"`
		Output json.RawMessage `json:"o,omitempty"`
		File   string          `json:"f,omitempty"` // a file's URL (a data URL: its bytes) and name
	}
	type message struct {
		Role  chat.Role `json:"r"`
		Parts []part    `json:"p"`
	}
	doc := struct {
		User     string    `json:"u"`
		System   string    `json:"s"`
		Messages []message `json:"m"`
	}{User: user, System: system, Messages: make([]message, len(history))}
	for i, m := range history {
		doc.Messages[i].Role = m.Role
		for _, p := range m.Parts {
			doc.Messages[i].Parts = append(doc.Messages[i].Parts, part{Type: p.Type, Text: p.Text, ID: p.ToolCallID,
				Name: p.ToolName, Args: compact(p.Args), Output: compact(p.Output), File: fileKey(p)})
		}
	}
	b, err := json.Marshal(doc)
	if err != nil { // the parts' JSON was checked: cannot happen
		panic(fmt.Sprintf("conversation key: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// fileKey is what identifies a file part in a conversation key: its
// stored file or URL, and its name.
func fileKey(p chat.Part) string {
	if p.Type != chat.PartFile {
		return ""
	}
	return p.FileID + "\x00" + p.URL + "\x00" + p.Name
}

// compact is raw JSON without insignificant space; nil stays nil.
func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// matchPage is how many chats of one conversation key a lookup reads at a
// time: more than one is a client that sent one request twice.
const matchPage = 8

// waitingFor finds the owner's Chat Completions chat that a request whose
// messages before its last assistant message have conversation key prior,
// whose last assistant message made calls and whose trailing tool messages
// answer them with results, continues: the one chat in requires_action
// labelled prior that waits for exactly those calls (ids, names and
// arguments). Call ids alone do not tell conversations apart (models
// number them), so neither chat of two that match is taken: the request
// starts a new chat. It reads the database only, so the chat may have run
// on any replica, and only chats of that key.
func (f *Facade) waitingFor(ctx context.Context, owner, prior string, calls, results []chat.Part) (chat.Chat, bool, error) {
	if len(results) != len(calls) {
		return chat.Chat{}, false, nil // not every call is answered: no chat waits for these alone
	}
	q := store.ChatQuery{Statuses: []chat.Status{chat.RequiresAction},
		Labels: map[string]string{labelAPI: labelAPIValue, labelConversation: prior}, Limit: matchPage}
	var found []chat.Chat
	for {
		page, err := f.svc.ListChats(ctx, owner, q)
		if err != nil {
			return chat.Chat{}, false, err
		}
		for _, c := range page.Chats {
			if waitsFor(c, calls) {
				found = append(found, c)
			}
		}
		if len(found) > 1 {
			f.log.Debug("openai facade: tool results match more than one chat; starting a new one",
				"chats", []string{found[0].ID, found[1].ID})
			return chat.Chat{}, false, nil
		}
		if page.NextCursor == "" {
			if len(found) == 0 {
				return chat.Chat{}, false, nil
			}
			return found[0], true, nil
		}
		q.Cursor = page.NextCursor
	}
}

// waitsFor reports whether c waits for exactly the client calls calls, in
// any order.
func waitsFor(c chat.Chat, calls []chat.Part) bool {
	if c.Status != chat.RequiresAction || c.RequiredAction == nil {
		return false
	}
	pending := chat.OfKind(c.RequiredAction.ToolCalls, chat.ActionClient)
	if len(pending) != len(calls) {
		return false
	}
	for _, p := range calls {
		i := slices.IndexFunc(pending, func(tc chat.ToolCall) bool { return tc.ToolCallID == p.ToolCallID })
		if i < 0 || pending[i].ToolName != p.ToolName || !bytes.Equal(compact(pending[i].Args), compact(p.Args)) {
			return false
		}
		pending = slices.Delete(pending, i, i+1)
	}
	return true
}

// beforeResume, when set, runs as the start of a continuation that answers
// calls (a Chat Completions request's tool messages, a Responses request's
// function_call_output items) begins, before it submits its results: tests
// hold a continuation there to let another one pass it.
var beforeResume atomic.Pointer[func(chatID string)]

// continueChat is the target of a request that answers the calls chat c
// waits for: submitting them as its tool results resumes it, with its
// hidden server-side steps still in the model's context. If another
// request answered them first, this one is a 409, whatever the chat waits
// for by then (a chat's call ids are unique: no later call has theirs).
// Once it holds, the chat's conversation key becomes key, the request's
// own.
func (f *Facade) continueChat(ctx context.Context, owner string, c chat.Chat, results []chat.Part, key string) (target, error) {
	baseline, err := f.lastMessage(ctx, c.ID)
	if err != nil {
		return target{}, err
	}
	submit := make([]service.ToolResult, len(results))
	for i, p := range results {
		submit[i] = service.ToolResult{ToolCallID: p.ToolCallID, Output: p.Output}
	}
	start := func(ctx context.Context) error {
		if hook := beforeResume.Load(); hook != nil {
			(*hook)(c.ID)
		}
		after, err := f.svc.SubmitToolResults(ctx, owner, c.ID, submit)
		var (
			se  *service.StatusError
			ids *service.IDMismatchError
		)
		if errors.As(err, &se) || errors.As(err, &ids) {
			status := c.Status
			if se != nil {
				status = se.Status
			}
			return &apiError{Status: http.StatusConflict, Type: typeConflict, Code: "conversation_moved_on",
				Message: fmt.Sprintf("parley chat %s no longer waits for these tool results (it is %s): another request answered them, or their deadline passed", c.ID, status)}
		}
		if err != nil {
			return err
		}
		f.relabel(ctx, owner, after, key)
		return nil
	}
	return target{chat: c, baseline: baseline, start: start}, nil
}

// relabel sets the conversation key of chat c, which a continuation just
// resumed. It is written even if the client goes away meanwhile: the run
// goes on, and the next request finds it by that key. A key not written
// costs the next request its continuation (it starts a new chat), never
// its answer, so a failure is logged only.
func (f *Facade) relabel(ctx context.Context, owner string, c chat.Chat, key string) {
	labels := maps.Clone(c.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[labelConversation] = key
	if _, err := f.svc.UpdateChat(context.WithoutCancel(ctx), owner, c.ID, service.ChatPatch{Labels: &labels}); err != nil {
		f.log.Warn("openai facade: conversation key not written; the chat's next continuation starts a new chat",
			"chat", c.ID, "err", err)
	}
}
