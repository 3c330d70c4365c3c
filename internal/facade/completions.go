package facade

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/service"
)

// Labels of the chats the facade makes.
const (
	labelAPI      = "api"
	labelAPIValue = "openai-chat"
	labelUser     = "user" // the request's "user"
	// labelConversation holds a Chat Completions chat's conversation key
	// (conversationKey): what the client had sent when the chat's run
	// started.
	labelConversation = chat.LabelConversation
)

// target is the chat a request runs: where its run starts, and the write
// that starts it.
type target struct {
	chat     chat.Chat
	baseline int64 // the last message before the run
	start    func(ctx context.Context) error
	// output is the format the run's answer is in, nil for free text:
	// with one, its text is the final answer's JSON alone (structuredStep).
	output *chat.OutputFormat
}

// chatCompletions serves POST /v1/chat/completions.
func (f *Facade) chatCompletions(w http.ResponseWriter, r *http.Request, owner string) error {
	var req completionRequest
	use, err := f.readRequest(w, r, owner, &req)
	if err != nil {
		return err
	}
	req.use = use
	cv, err := req.conversation(f.cfg.Limits.MaxMessageBytes, f.fileRules(use.Model))
	if err != nil {
		return err
	}
	release, err := f.openStream(r.Context(), owner, req.Stream)
	if err != nil {
		return err
	}
	defer release()
	tg, err := f.target(r.Context(), owner, &req, cv)
	if err != nil {
		return err
	}
	f.log.Debug("openai facade: chat completion", "chat", tg.chat.ID, "after", tg.baseline, "stream", req.Stream)
	resp := newResponder(&req, tg.chat, tg.baseline)
	if req.Stream {
		return f.streamRun(w, r, owner, tg, resp)
	}
	out, err := f.runUntilAnswer(r.Context(), owner, tg, nil)
	if err != nil {
		return err
	}
	if out.Chat.Status == chat.Error {
		return runFailed(out.Chat)
	}
	writeJSON(w, http.StatusOK, resp.completion(out))
	return nil
}

// runFailed is the error of a run that ended its chat in error: a 429 when
// the provider's rate limit stopped it (after parley's own retries), so
// the client backs off; OpenAI's 429 insufficient_quota when the owner's
// budget did; a 500 the SDKs do not retry when the answer never matched
// its format; else a 500.
func runFailed(c chat.Chat) *apiError {
	msg := "the model's run failed"
	if c.LastError != nil {
		msg = fmt.Sprintf("the model's run failed (%s): %s", c.LastError.Kind, c.LastError.Message)
	}
	msg += fmt.Sprintf("; parley chat %s", c.ID)
	if c.LastError != nil && c.LastError.HTTPStatus == http.StatusTooManyRequests {
		return &apiError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "rate_limit_exceeded", Message: msg}
	}
	if c.LastError != nil && c.LastError.Kind == chat.KindSpendLimit {
		return &apiError{Status: http.StatusTooManyRequests, Type: typeQuota, Code: "insufficient_quota", NoRetry: true, Message: msg}
	}
	if c.LastError != nil && c.LastError.Kind == chat.KindOutputInvalid {
		// The same request would cost the same model calls again and most
		// likely fail alike: the SDKs are told not to retry it.
		return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Code: chat.KindOutputInvalid, NoRetry: true, Message: msg}
	}
	return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Code: "run_failed", Message: msg}
}

// target finds the chat a request continues, or creates one for it.
func (f *Facade) target(ctx context.Context, owner string, req *completionRequest, cv conversation) (target, error) {
	key := conversationKey(req.User, cv.System, cv.History)
	if len(cv.Results) > 0 {
		c, ok, err := f.waitingFor(ctx, owner, conversationKey(req.User, cv.System, cv.Prior), cv.Calls, cv.Results)
		if err != nil {
			return target{}, err
		}
		if ok {
			// The results go on with the turn they answer, in the format
			// it started with (the request's response_format is not read).
			tg, err := f.continueChat(ctx, owner, c, cv.Results, key)
			tg.output = c.TurnOutput()
			return tg, err
		}
	}
	return f.newChat(ctx, owner, req, cv, key)
}

// newChat creates the chat of a request that continues none: its messages
// are the chat's history, and starting it answers them. A Chat Completions
// chat is labelled with key, the request's conversation key, by which the
// request that answers its calls finds it (waitingFor).
func (f *Facade) newChat(ctx context.Context, owner string, req *completionRequest, cv conversation, key string) (target, error) {
	tools, err := req.dynamicTools()
	if err != nil {
		return target{}, err
	}
	for i, t := range tools {
		// The service refuses it too; this says so in the request's terms.
		if f.tools != nil && f.tools.Has(t.Name) {
			return target{}, invalid(fmt.Sprintf("tools[%d].function.name", i),
				"%q is the name of one of parley's server-side tools, which the model is offered already; name the function otherwise", t.Name)
		}
	}
	in := service.NewChat{
		Model:          req.use.Model,
		SystemPrompt:   cv.System,
		Title:          title(cv.History, f.cfg.Limits.Chat().MaxTitleBytes),
		Labels:         map[string]string{labelAPI: labelAPIValue},
		DynamicTools:   tools,
		ResponseFormat: req.format,
	}
	if req.use.Agent != "" {
		// The agent gives what the request leaves out: its model, and
		// its functions unless the request declares its own.
		in.Agent, in.Model = req.use.Agent, ""
		if len(tools) == 0 {
			in.DynamicTools = nil
		}
	}
	if req.apiLabel != "" {
		in.Labels[labelAPI] = req.apiLabel
	} else {
		in.Labels[labelConversation] = key
	}
	if req.User != "" {
		in.Labels[labelUser] = req.User
	}
	if req.toolChoiceNone() {
		in.DynamicTools, in.Tools = nil, chat.ToolGlobs{} // offer no tool at all
	}
	created, msgs, err := f.svc.CreateWithHistory(ctx, owner, in, cv.History)
	if err != nil {
		var ve *chat.ValidationError
		if errors.As(err, &ve) && ve.Field == "labels" {
			return target{}, invalid("user", "%s", ve.Message)
		}
		if errors.As(err, &ve) && ve.Field == "agent" {
			return target{}, modelNotFound(req.Model) // deleted since the request was read
		}
		return target{}, err
	}
	id := created.Chat.ID
	start := func(ctx context.Context) error {
		_, err := f.svc.StartChat(ctx, owner, id)
		return err
	}
	return target{chat: created.Chat, baseline: msgs[len(msgs)-1].ID, start: start,
		output: created.Chat.TurnOutput()}, nil
}

// titlePrefix starts the title of every facade chat. A title of the
// client's making also keeps the engine from asking the model for one,
// which a Chat Completions client does not expect to pay for.
const titlePrefix = "API: "

// title names a chat by the start of its first user message.
func title(history []chat.Message, maxBytes int) string {
	for _, m := range history {
		if m.Role == chat.RoleUser {
			return titlePrefix + chat.FallbackTitle(m.Parts, maxBytes-len(titlePrefix))
		}
	}
	return titlePrefix + "chat completion"
}
