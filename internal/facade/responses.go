package facade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// responses serves POST /v1/responses. A request without
// previous_response_id starts a chat (its input the chat's history, its
// instructions the system prompt); one with it continues that response's
// chat. Both run through the same driver as Chat Completions.
func (f *Facade) responses(w http.ResponseWriter, r *http.Request, owner string) error {
	var req responsesRequest
	use, err := f.readRequest(w, r, owner, &req)
	if err != nil {
		return err
	}
	req.use = use
	items, err := req.items()
	if err != nil {
		return err
	}
	release, err := f.openStream(r.Context(), owner, req.Stream)
	if err != nil {
		return err
	}
	defer release()
	var tg target
	if req.PreviousResponseID != "" {
		tg, err = f.continueResponse(r.Context(), owner, &req, items)
	} else {
		tg, err = f.newResponse(r.Context(), owner, &req, items)
	}
	if err != nil {
		return err
	}
	f.log.Debug("openai facade: response", "chat", tg.chat.ID, "after", tg.baseline, "stream", req.Stream)
	resp := newRespResponder(&req, tg)
	if req.Stream {
		return f.streamResponse(w, r, owner, tg, resp)
	}
	out, err := f.runUntilAnswer(r.Context(), owner, tg, nil)
	if err != nil {
		return err
	}
	if out.Chat.Status == chat.Error {
		return runFailed(out.Chat)
	}
	writeJSON(w, http.StatusOK, resp.object("completed", resp.output(out), &out.Usage, nil))
	return nil
}

// newResponse creates the chat of a request that continues none, as a
// Chat Completions request with the same conversation would.
func (f *Facade) newResponse(ctx context.Context, owner string, req *responsesRequest, items []inputItem) (target, error) {
	cr, idx, err := req.completion(items)
	if err != nil {
		return target{}, err
	}
	cv, err := cr.conversation(f.cfg.Limits.MaxMessageBytes, f.fileRules(cr.use.Model))
	if err != nil {
		return target{}, inputError(err, idx)
	}
	if strings.TrimSpace(req.Instructions) != "" {
		cv.System = strings.TrimSpace(strings.Join([]string{req.Instructions, cv.System}, "\n\n"))
	}
	tg, err := f.newChat(ctx, owner, cr, cv, "")
	if err != nil {
		return target{}, inputError(err, idx)
	}
	return tg, nil
}

// continueResponse is the target of a request with previous_response_id:
// the chat that response ran. Its function_call_output items answer the
// calls the chat waits for (exactly those); otherwise its messages are the
// user's next message, for a chat that waits for one. The chat keeps its
// model, system prompt and tools.
func (f *Facade) continueResponse(ctx context.Context, owner string, req *responsesRequest, items []inputItem) (target, error) {
	prev := req.PreviousResponseID
	notFound := &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "previous_response_not_found",
		Param: strPtr("previous_response_id"), Message: fmt.Sprintf("Previous response with id %q not found.", prev)}
	id, ok := parseResponseID(prev)
	if !ok {
		return target{}, notFound
	}
	c, err := f.svc.GetChat(ctx, owner, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && c.Labels[labelAPI] != labelResponses) {
		return target{}, notFound
	}
	if err != nil {
		return target{}, err
	}
	var results []service.ToolResult
	var texts []string
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch {
		case it.Type == "function_call_output":
			text, err := itemText(it.Output, param+".output")
			if err != nil {
				return target{}, err
			}
			out, _ := json.Marshal(text)
			results = append(results, service.ToolResult{ToolCallID: it.CallID, Output: out})
		case (it.Type == "" || it.Type == "message") && it.Role == "user":
			if j := filePartAt(it.Content); j >= 0 {
				return target{}, invalid(fmt.Sprintf("%s.content[%d]", param, j), "a request that continues a response takes text only: "+
					"send images and files in a request without previous_response_id, with the conversation in its input")
			}
			text, err := itemText(it.Content, param+".content")
			if err != nil {
				return target{}, err
			}
			if strings.TrimSpace(text) != "" {
				texts = append(texts, text)
			}
		case (it.Type == "" || it.Type == "message") && (it.Role == "system" || it.Role == "developer"):
			// The continued chat keeps its system prompt.
		default:
			return target{}, invalid(param, "a request that continues a response takes user messages or function_call_output items only: the rest of the conversation is parley's chat already")
		}
	}
	if len(results) > 0 && len(texts) > 0 {
		return target{}, invalid("input", "answer the function calls of %s with function_call_output items alone; send the next user message once the model answered them", prev)
	}
	baseline, err := f.lastMessage(ctx, c.ID)
	if err != nil {
		return target{}, err
	}
	pending := clientCalls(c)
	if len(results) > 0 {
		if len(pending) == 0 {
			return target{}, movedOn(prev, c.ID, c.Status)
		}
		if err := answersExactly(pending, results); err != nil {
			return target{}, invalid("input", "the function_call_output items must answer exactly the calls of %s (%s): %s",
				prev, strings.Join(pending, ", "), err.Error())
		}
		start := func(ctx context.Context) error {
			if hook := beforeResume.Load(); hook != nil {
				(*hook)(c.ID)
			}
			_, err := f.svc.SubmitToolResults(ctx, owner, c.ID, results)
			var se *service.StatusError
			var ids *service.IDMismatchError
			switch {
			case errors.As(err, &se):
				return movedOn(prev, c.ID, se.Status)
			case errors.As(err, &ids):
				// The outputs answered exactly the calls the chat waited
				// for when the request came, and a chat's call ids are
				// unique: another request answered them, and the chat
				// waits for newer calls.
				return movedOn(prev, c.ID, chat.RequiresAction)
			}
			return err
		}
		// The outputs go on with the turn they answer, in the format it
		// started with (the request's text.format is not read).
		return target{chat: c, baseline: baseline, start: start, output: c.TurnOutput()}, nil
	}
	if len(texts) == 0 {
		return target{}, invalid("input", "must hold a user message or function_call_output items")
	}
	if len(pending) > 0 {
		return target{}, invalid("input", "%s waits for the results of its function calls: send function_call_output items for %s",
			prev, strings.Join(pending, ", "))
	}
	content, _ := json.Marshal(strings.Join(texts, "\n\n"))
	format := turnFormat(c, req)
	start := func(ctx context.Context) error {
		_, err := f.svc.Post(ctx, owner, c.ID, service.Post{Content: content, Busy: chat.BusyReject, ResponseFormat: format})
		var be *service.BusyError
		if errors.As(err, &be) {
			return &apiError{Status: http.StatusConflict, Type: typeConflict, Code: "conversation_busy",
				Message: fmt.Sprintf("parley chat %s of %s is %s: wait for its run to end, then continue it", c.ID, prev, be.Status)}
		}
		return err
	}
	output := c.ResponseFormat.Output()
	if format != nil {
		output = format.Output()
	}
	return target{chat: c, baseline: baseline, start: start, output: output}, nil
}

// turnFormat is the format of the turn a request that continues chat c
// with a user message starts (nil: the chat's): its text.format, which
// holds for its response only, as at OpenAI; without one, free text,
// unless c runs an agent, whose chats keep their format.
func turnFormat(c chat.Chat, req *responsesRequest) *chat.ResponseFormat {
	switch {
	case req.format != nil:
		return req.format
	case c.Agent != "" || c.ResponseFormat == nil:
		return nil
	}
	return &chat.ResponseFormat{Type: chat.FormatText}
}

// movedOn is the 409 of a continuation whose function outputs chat id
// (now in status) no longer waits for: another request answered them, or
// their deadline passed and parley answered them in the client's place.
func movedOn(prev, id string, status chat.Status) *apiError {
	return &apiError{Status: http.StatusConflict, Type: typeConflict, Code: "conversation_moved_on",
		Message: fmt.Sprintf("%s no longer waits for these function_call_output items (parley chat %s is %s): another request continued it, or the deadline of its calls passed; continue from the chat's latest response", prev, id, status)}
}

// answersExactly checks that results answer each of the pending calls
// once, and nothing else; its error names the calls missing, unknown or
// answered twice.
func answersExactly(pending []string, results []service.ToolResult) error {
	e := service.IDMismatchError{Kind: chat.ActionClient}
	seen := map[string]bool{}
	for _, r := range results {
		switch {
		case seen[r.ToolCallID]:
			if !slices.Contains(e.Duplicate, r.ToolCallID) {
				e.Duplicate = append(e.Duplicate, r.ToolCallID)
			}
		case !slices.Contains(pending, r.ToolCallID):
			e.Unknown = append(e.Unknown, r.ToolCallID)
		}
		seen[r.ToolCallID] = true
	}
	for _, id := range pending {
		if !seen[id] {
			e.Missing = append(e.Missing, id)
		}
	}
	if len(e.Missing)+len(e.Unknown)+len(e.Duplicate) > 0 {
		return &e
	}
	return nil
}

// clientCalls are the ids of the client calls the chat waits for.
func clientCalls(c chat.Chat) []string {
	if c.Status != chat.RequiresAction || c.RequiredAction == nil {
		return nil
	}
	var ids []string
	for _, tc := range chat.OfKind(c.RequiredAction.ToolCalls, chat.ActionClient) {
		ids = append(ids, tc.ToolCallID)
	}
	return ids
}

// lastMessage is the id of the chat's last message.
func (f *Facade) lastMessage(ctx context.Context, id string) (int64, error) {
	tail, err := f.st.LastTurn(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("read the last turn of %s: %w", id, err)
	}
	var last int64
	for _, m := range tail {
		last = max(last, m.ID)
	}
	return last, nil
}

func strPtr(s string) *string { return &s }
