package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/aisdk"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/follow"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// aisdkChat answers POST /api/v1/ai-sdk/chat, the endpoint of the AI SDK's
// DefaultChatTransport: it does what the request's last message asks of
// the chat (creating the chat on first use) and streams the run as UI
// message chunks. Errors before the stream are JSON bodies; after, error
// chunks.
func (a *api) aisdkChat(w http.ResponseWriter, r *http.Request, owner string) error {
	var raw json.RawMessage
	if err := a.decode(w, r, &raw); err != nil {
		return err
	}
	var req aisdk.Request
	if err := json.Unmarshal(raw, &req); err != nil {
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Message: "not a chat request: " + err.Error()}
	}
	act, err := req.Parse()
	if err != nil {
		return aisdkRequestError(err)
	}
	ctx := r.Context()
	release, err := a.gate.OpenStream(ctx, owner) // before anything is written
	if err != nil {
		return err
	}
	defer release()
	for attempt := 1; ; attempt++ {
		err := a.aisdkChatOnce(ctx, w, r, owner, req, act)
		if errors.Is(err, service.ErrAppChatMoved) && attempt < 3 {
			continue // a concurrent first request created the chat: post to that one
		}
		return err
	}
}

// aisdkChatOnce is one attempt of aisdkChat. A first message creates the
// chat its app id names, through the service (lookup, create and bind in
// one transaction); service.ErrAppChatMoved says another request bound
// the app id first, before anything was written or streamed.
func (a *api) aisdkChatOnce(ctx context.Context, w http.ResponseWriter, r *http.Request, owner string, req aisdk.Request, act aisdk.Action) error {
	id, err := a.svc.AppChatID(ctx, owner, req.ID)
	fresh := false
	if errors.Is(err, store.ErrNotFound) && act.Kind == aisdk.ActionMessage {
		var u uuid.UUID
		u, err = uuid.NewV7()
		id, fresh = u.String(), true // the chat the post creates
	}
	if err != nil {
		return err
	}
	out := &aisdkWriter{sse: newSSE(w)}
	v := &aisdkView{view: newChatView(out, out.start), idle: func(c chat.Chat) error {
		// Nothing runs: the answer left the chat waiting for more.
		if err := out.start(); err != nil {
			return err
		}
		_ = out.event(events.KindStatus, events.Encode(map[string]any{"status": chat.Running}))
		_ = out.event(events.KindStatus, events.Encode(map[string]any{"status": c.Status, "chat": c}))
		return errRunEnded
	}}
	// The request acts once the follow is subscribed: no event of the run
	// it starts is missed.
	start := func(ctx context.Context) (int64, error) {
		var (
			c      chat.Chat
			posted service.PostResult
			cursor int64
			err    error
		)
		if act.Kind == aisdk.ActionMessage {
			c, posted, cursor, err = a.aisdkPost(ctx, owner, id, fresh, req, act)
		} else {
			c, cursor, err = a.aisdkAnswerOrRegenerate(ctx, r, owner, id, act)
		}
		if err != nil {
			return 0, err
		}
		v.acted = &c
		out.m = aisdk.NewMapper(act.MessageID, clientTools(c))
		if posted.Queued != nil {
			out.m.AfterQueued()
		}
		return cursor, nil
	}
	return a.aisdkFollow(ctx, owner, id, follow.Options{Start: start}, v)
}

// aisdkFollow follows the chat for an AI SDK view: its errors before the
// stream began are HTTP errors; a stream ends at its finish chunk.
func (a *api) aisdkFollow(ctx context.Context, owner, id string, o follow.Options, v *aisdkView) error {
	err := a.followChat(ctx, owner, id, o, v)
	if errors.Is(err, errRunEnded) || errors.Is(err, errNoContent) {
		return nil
	}
	return err
}

// aisdkView shows a followed run as UI message chunks (the chat view's
// events, mapped by the aisdkWriter it writes to). idle answers instead
// when nothing runs: in the chat the request's action left (acted), or
// else in the chat as first read. A run that ends between the action and
// the read is still streamed, from the messages it wrote.
type aisdkView struct {
	view  *chatView
	idle  func(c chat.Chat) error
	acted *chat.Chat
	seen  bool
}

func (v *aisdkView) chatView() *chatView { return v.view }

func (v *aisdkView) Chat(c chat.Chat) error {
	if !v.seen {
		v.seen = true
		first := c
		if v.acted != nil {
			first = *v.acted
		}
		if first.Status != chat.Pending && first.Status != chat.Running {
			return v.idle(first)
		}
	}
	return v.view.Chat(c)
}

func (v *aisdkView) Event(ev events.ChatEvent) error { return v.view.Event(ev) }

func (v *aisdkView) KeepAlive() error { return v.view.KeepAlive() }

// aisdkPost posts the request's user message to chat id, which the
// service creates with the request's "parley" options (and binds to the
// app id) when fresh. It returns the chat after the post, what became of
// the message, and the stream's cursor.
func (a *api) aisdkPost(ctx context.Context, owner, id string, fresh bool, req aisdk.Request, act aisdk.Action) (chat.Chat, service.PostResult, int64, error) {
	var cursor int64
	if !fresh {
		h, err := a.historyFacts(ctx, id)
		if err != nil {
			return chat.Chat{}, service.PostResult{}, 0, err
		}
		cursor = h.last
	}
	posted, err := a.svc.PostAppMessage(ctx, owner, req.ID, id, aisdkContent(act), aisdkNewChat(req))
	if err != nil {
		return chat.Chat{}, service.PostResult{}, 0, err
	}
	c, err := a.svc.GetChat(ctx, owner, id)
	if err != nil {
		return chat.Chat{}, service.PostResult{}, 0, err
	}
	if posted.Message != nil {
		cursor = posted.Message.ID // the stream starts after the request's own message
	}
	return c, posted, cursor, nil
}

// aisdkAnswerOrRegenerate submits the request's tool outputs and approval
// decisions, or regenerates, on chat id, and returns the chat after and
// the stream's cursor.
func (a *api) aisdkAnswerOrRegenerate(ctx context.Context, r *http.Request, owner, id string, act aisdk.Action) (chat.Chat, int64, error) {
	before, err := a.svc.GetChat(ctx, owner, id)
	if err != nil {
		return chat.Chat{}, 0, err
	}
	h, err := a.historyFacts(ctx, id)
	if err != nil {
		return chat.Chat{}, 0, err
	}
	if act.Kind == aisdk.ActionRegenerate {
		c, err := a.svc.Regenerate(ctx, owner, id)
		return c, h.last, err
	}
	act = h.unanswered(act)
	if len(act.Outputs) == 0 && len(act.Decisions) == 0 {
		return chat.Chat{}, 0, &service.StatusError{ChatID: id, Status: before.Status,
			Reason: "every tool output and approval answer of the last message is in the chat already"}
	}
	c, err := a.aisdkAnswer(ctx, r, owner, before, act)
	return c, h.last, err
}

// aisdkAnswer submits the client's tool outputs, then its approval
// decisions, each under the rules of its own route.
func (a *api) aisdkAnswer(ctx context.Context, r *http.Request, owner string, c chat.Chat, act aisdk.Action) (chat.Chat, error) {
	if len(act.Outputs) > 0 && len(act.Decisions) > 0 && !decisionsMatch(c, act.Decisions) {
		// Refused anyway: refuse it before the outputs are written.
		return a.aisdkDecide(ctx, r, owner, c, act.Decisions)
	}
	if len(act.Outputs) > 0 {
		results := make([]service.ToolResult, len(act.Outputs))
		for i, o := range act.Outputs {
			results[i] = service.ToolResult{ToolCallID: o.ToolCallID, Output: o.Output, IsError: o.IsError}
		}
		var err error
		if c, err = a.svc.SubmitToolResults(ctx, owner, c.ID, results); err != nil {
			return chat.Chat{}, err
		}
	}
	if len(act.Decisions) > 0 {
		return a.aisdkDecide(ctx, r, owner, c, act.Decisions)
	}
	return c, nil
}

// aisdkDecide submits approval decisions as the owner and the request's token.
func (a *api) aisdkDecide(ctx context.Context, r *http.Request, owner string, c chat.Chat, ds []aisdk.Decision) (chat.Chat, error) {
	decisions := make([]service.Decision, len(ds))
	for i, d := range ds {
		decisions[i] = service.Decision{ToolCallID: d.ToolCallID, Approve: d.Approve, Reason: d.Reason}
	}
	by := service.Decider{Owner: owner}
	if tid, ok := r.Context().Value(tokenIDKey{}).(string); ok {
		tok, err := a.st.GetToken(ctx, tid)
		if err != nil {
			return chat.Chat{}, fmt.Errorf("read the deciding token: %w", err)
		}
		by.Token = tok.Name
	}
	return a.svc.SubmitApprovals(ctx, by, c.ID, decisions)
}

// decisionsMatch reports whether ds answers exactly the approvals c waits for.
func decisionsMatch(c chat.Chat, ds []aisdk.Decision) bool {
	if c.RequiredAction == nil {
		return false
	}
	want := map[string]bool{}
	for _, tc := range c.RequiredAction.ToolCalls {
		if tc.Kind == chat.ActionApproval {
			want[tc.ToolCallID] = true
		}
	}
	if len(want) != len(ds) {
		return false
	}
	for _, d := range ds {
		if !want[d.ToolCallID] {
			return false
		}
	}
	return true
}

// aisdkNewChat is the chat a request's first message creates: its
// "parley" options, labelled with the app's id.
func aisdkNewChat(req aisdk.Request) service.NewChat {
	var o aisdk.Options
	if req.Parley != nil {
		o = *req.Parley
	}
	labels := map[string]string{}
	for k, v := range o.Labels {
		labels[k] = v
	}
	labels[aisdk.LabelAPI] = aisdk.LabelAPIValue
	labels[aisdk.LabelClientID] = req.ID
	return service.NewChat{Model: o.Model, SystemPrompt: o.SystemPrompt, Title: o.Title, Labels: labels,
		DynamicTools: o.DynamicTools, Tools: o.Tools, Approve: o.Approve, Agent: o.Agent}
}

// historyFacts is what a request needs to know of a chat's history.
type historyFacts struct {
	last, lastUser int64           // the last message's id, the last user message's (0: none)
	results        map[string]bool // calls with a result
	decided        map[string]bool // calls with an approval decision
}

// historyFacts reads the chat's history for its facts.
func (a *api) historyFacts(ctx context.Context, id string) (historyFacts, error) {
	h := historyFacts{results: map[string]bool{}, decided: map[string]bool{}}
	err := store.ForEachMessage(ctx, a.st, id, 0, func(m chat.Message) error {
		h.last = m.ID
		switch m.Role {
		case chat.RoleUser:
			if !chat.IsRepair(m) { // a person's, not a repair request
				h.lastUser = m.ID
			}
		case chat.RoleTool:
			for _, p := range m.Parts {
				switch p.Type {
				case "tool-result":
					h.results[p.ToolCallID] = true
				case "tool-decision":
					h.decided[p.ToolCallID] = true
				}
			}
		}
		return nil
	})
	return h, err
}

// unanswered drops from an answer the outputs and decisions the chat holds
// already: the client's assistant message keeps what an earlier request
// sent (a client tool's output while approvals were still open, or the
// other way round).
func (h historyFacts) unanswered(act aisdk.Action) aisdk.Action {
	if act.Kind != aisdk.ActionAnswer {
		return act
	}
	outs := act.Outputs[:0:0]
	for _, o := range act.Outputs {
		if !h.results[o.ToolCallID] {
			outs = append(outs, o)
		}
	}
	decs := act.Decisions[:0:0]
	for _, d := range act.Decisions {
		if !h.decided[d.ToolCallID] {
			decs = append(decs, d)
		}
	}
	act.Outputs, act.Decisions = outs, decs
	return act
}

// aisdkStream answers GET /api/v1/ai-sdk/chat/{id}/stream (useChat's
// resume): 204 when nothing runs, an id that names no chat yet included
// (useChat resumes a new chat on mount), else the run in progress from its
// start.
func (a *api) aisdkStream(w http.ResponseWriter, r *http.Request, owner string) error {
	ctx := r.Context()
	id, err := a.svc.AppChatID(ctx, owner, r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	release, err := a.gate.OpenStream(ctx, owner)
	if err != nil {
		return err
	}
	defer release()
	out := &aisdkWriter{sse: newSSE(w)}
	v := &aisdkView{view: newChatView(out, out.start), idle: func(chat.Chat) error {
		w.WriteHeader(http.StatusNoContent)
		return errNoContent
	}}
	// The run is streamed from its start: after the last user message.
	start := func(ctx context.Context) (int64, error) {
		c, err := a.svc.GetChat(ctx, owner, id)
		if err != nil {
			return 0, err
		}
		h, err := a.historyFacts(ctx, id)
		if err != nil {
			return 0, err
		}
		// Read after the history: queued messages here were not in it yet.
		queued, err := a.svc.ListQueued(ctx, owner, id)
		if err != nil {
			return 0, err
		}
		out.m = aisdk.NewMapper("", clientTools(c))
		if len(queued) > 0 {
			// The app was seeded with the queued messages after the
			// history (aisdk.Messages): the stream carries the answer
			// to them.
			out.m.AfterQueued()
			return h.last, nil
		}
		return h.lastUser, nil
	}
	return a.aisdkFollow(ctx, owner, id, follow.Options{Start: start}, v)
}

// aisdkMessages answers GET /api/v1/ai-sdk/chat/{id}/messages: the chat as
// the UIMessage list useChat is seeded with.
func (a *api) aisdkMessages(w http.ResponseWriter, r *http.Request, owner string) error {
	ctx := r.Context()
	id, err := a.svc.AppChatID(ctx, owner, r.PathValue("id"))
	if err != nil {
		return err
	}
	c, err := a.svc.GetChat(ctx, owner, id)
	if err != nil {
		return err
	}
	history, queued, err := a.historyAndQueue(ctx, owner, id)
	if err != nil {
		return err
	}
	var pending []chat.ToolCall
	if c.RequiredAction != nil {
		pending = c.RequiredAction.ToolCalls
	}
	running := c.Status == chat.Pending || c.Status == chat.Running
	writeJSON(w, http.StatusOK, aisdk.Messages(history, clientTools(c), pending, running, queued))
	return nil
}

// historyAndQueue reads a chat's history and its queued messages as of one
// moment: a message promoted from the queue while the history is read is
// in one of them, exactly. The queue is read before and after the history;
// when a message read before has left it after, the reads are repeated.
func (a *api) historyAndQueue(ctx context.Context, owner, id string) ([]chat.Message, []chat.QueuedMessage, error) {
	for attempt := 1; ; attempt++ {
		before, err := a.svc.ListQueued(ctx, owner, id)
		if err != nil {
			return nil, nil, err
		}
		var history []chat.Message
		if err := store.ForEachMessage(ctx, a.st, id, 0, func(m chat.Message) error {
			history = append(history, m)
			return nil
		}); err != nil {
			return nil, nil, err
		}
		if len(before) == 0 {
			return history, nil, nil // one promoted meanwhile is in the history
		}
		after, err := a.svc.ListQueued(ctx, owner, id)
		if err != nil {
			return nil, nil, err
		}
		if len(after) > 0 && after[0].ID == before[0].ID || attempt == 3 {
			// The queue is promoted whole and in order: its first is
			// still there, so none read before entered the history.
			return history, before, nil
		}
	}
}

// aisdkInterrupt answers POST /api/v1/ai-sdk/chat/{id}/interrupt, an app's
// Stop button by the app's own chat id: POST /chats/{id}/interrupt on the
// chat it names.
func (a *api) aisdkInterrupt(w http.ResponseWriter, r *http.Request, owner string) error {
	c, err := a.svc.InterruptAppChat(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

// clientTools returns the names of c's dynamic tools.
func clientTools(c chat.Chat) map[string]bool {
	names := make(map[string]bool, len(c.DynamicTools))
	for _, t := range c.DynamicTools {
		names[t.Name] = true
	}
	return names
}

// aisdkRequestError maps a refused request to its 400.
func aisdkRequestError(err error) error {
	var re *aisdk.RequestError
	if errors.As(err, &re) {
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_field", Message: re.Error(),
			Details: map[string]any{"field": re.Field}}
	}
	return err
}

// errRunEnded ends an AI SDK stream once its finish chunk is out;
// errNoContent a resume that found nothing running (204).
var (
	errRunEnded  = errors.New("the run ended")
	errNoContent = errors.New("nothing runs")
)

// aisdkWriter writes a chat stream's events as UI message chunks.
type aisdkWriter struct {
	sse *sse
	m   *aisdk.Mapper
}

// start sends the headers of a UI message stream.
func (s *aisdkWriter) start() error {
	s.sse.w.Header().Set("X-Vercel-Ai-Ui-Message-Stream", "v1")
	return s.sse.start()
}

func (s *aisdkWriter) event(kind string, data []byte) error {
	chunks, err := s.m.Event(kind, data)
	if err != nil {
		return err
	}
	err = s.sse.write(func(w io.Writer) error {
		for _, c := range chunks {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return err
			}
		}
		if s.m.Done() {
			_, err := io.WriteString(w, "data: [DONE]\n\n")
			return err
		}
		return nil
	})
	if err == nil && s.m.Done() {
		return errRunEnded
	}
	return err
}

func (s *aisdkWriter) eventID(kind, _ string, data []byte) error { return s.event(kind, data) }

func (s *aisdkWriter) comment(text string) error { return s.sse.comment(text) }

// aisdkContent is the content of a message's action: its text, then a
// file part for each file it attaches.
func aisdkContent(act aisdk.Action) json.RawMessage {
	if len(act.FileIDs) == 0 {
		b, _ := json.Marshal(act.Text)
		return b
	}
	parts := []chat.Part{}
	if strings.TrimSpace(act.Text) != "" {
		parts = append(parts, chat.TextPart(act.Text))
	}
	for _, id := range act.FileIDs {
		parts = append(parts, chat.Part{Type: chat.PartFile, FileID: id})
	}
	b, _ := json.Marshal(parts)
	return b
}
