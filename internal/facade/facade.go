// Package facade serves an OpenAI-compatible API under /v1: POST
// /v1/chat/completions and POST /v1/responses (streamed or not) and GET
// /v1/models, so a program
// written for the OpenAI API works against parley by changing its base URL
// and key (docs/openai-compat.md).
//
// Every conversation is a parley chat labelled "api: openai-chat" (or
// "api: openai-responses"), visible in parley's own API. A request's function tools become the chat's dynamic
// tools; server-side tools run inside the request, unseen by the client. The
// run driver (run.go) knows nothing of either API's shapes: both share it.
// A request's model may name an agent, "agent:<name>" (agents.go), and its
// response_format or text.format ask for structured output (format.go).
package facade

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/follow"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/tools"
)

// Prefix is the path the facade is mounted under.
const Prefix = "/v1/"

// DefaultKeepAlive is the interval of keep-alive comments of a stream when
// Deps sets none.
const DefaultKeepAlive = 15 * time.Second

// Deps is what the facade needs: the same as parley's API.
type Deps struct {
	Config    *config.Config
	Store     store.Store
	PubSub    pubsub.PubSub
	Service   *service.Service
	Tools     *tools.Registry // server-side tools; nil for none
	Logger    *slog.Logger
	KeepAlive time.Duration // stream keep-alive interval; 0 means DefaultKeepAlive
	// Gate, when set, counts every authenticated request against its
	// token's rate limit, and every streamed answer among the owner's open
	// streams (*quota.Gate, shared with parley's API).
	Gate Admitter
	// Follower follows the runs requests start; nil makes one of PubSub,
	// Service and Store (parley's API shares its own).
	Follower *follow.Follower
	// Refused, when set, is told of every error answered; parley's API
	// counts the refusals for an owner's quotas among them.
	Refused func(error)
	// Agents, when set, gives the agents a request may name as its model
	// ("agent:<name>"); nil offers none.
	Agents Agents
}

// Admitter refuses a request of an owner's token (its id) that is over the
// token's rate limit, with a *quota.RateError, and a stream over the
// owner's max_streams, with a *quota.CapError.
type Admitter interface {
	Admit(ctx context.Context, owner, tokenID string) error
	OpenStream(ctx context.Context, owner string) (release func(), err error)
}

// openStream counts a streamed answer among the owner's open streams
// (max_streams), before the request writes anything; release ends it. An
// answer that is not streamed is not counted.
func (f *Facade) openStream(ctx context.Context, owner string, stream bool) (release func(), err error) {
	if !stream || f.gate == nil {
		return func() {}, nil
	}
	return f.gate.OpenStream(ctx, owner)
}

// Facade is the HTTP handler of the OpenAI-compatible routes.
type Facade struct {
	cfg       *config.Config
	st        store.Store
	ps        pubsub.PubSub
	svc       *service.Service
	tools     *tools.Registry
	log       *slog.Logger
	keepAlive time.Duration
	gate      Admitter // nil: no rate limits
	follower  *follow.Follower
	refused   func(error) // nil: not told
	agents    Agents      // nil: no agent is a model
	mux       *http.ServeMux
}

// New returns the facade's handler. Config, Store, PubSub and Service are
// required; a nil Logger discards.
func New(d Deps) (*Facade, error) {
	if d.Config == nil || d.Store == nil || d.PubSub == nil || d.Service == nil {
		return nil, errors.New("facade: Config, Store, PubSub and Service are required")
	}
	f := &Facade{cfg: d.Config, st: d.Store, ps: d.PubSub, svc: d.Service, tools: d.Tools,
		log: d.Logger, keepAlive: d.KeepAlive, gate: d.Gate, follower: d.Follower, refused: d.Refused, agents: d.Agents, mux: http.NewServeMux()}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.follower == nil {
		f.follower = follow.New(d.PubSub, d.Service, d.Store, f.log)
	}
	if f.keepAlive <= 0 {
		f.keepAlive = DefaultKeepAlive
	}
	f.handle("GET /v1/models", f.listModels)
	f.handle("GET /v1/models/{model}", f.getModel)
	f.handle("POST /v1/chat/completions", f.chatCompletions)
	f.handle("POST /v1/responses", f.responses)
	return f, nil
}

// ServeHTTP routes the request; an unknown route is an OpenAI-shaped 404.
// No answer, JSON, error or stream, may be sniffed by a browser as another
// type: a chat's text is the client's, and could look like HTML.
func (f *Facade) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, pattern := f.mux.Handler(r); pattern == "" {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "unknown_url",
			Message: "Invalid URL (" + r.Method + " " + r.URL.Path + "): parley serves /v1/chat/completions, /v1/responses and /v1/models"})
		return
	}
	f.mux.ServeHTTP(w, r)
}

// ownerHandler is a handler of an authenticated route; owner is the token's.
type ownerHandler func(w http.ResponseWriter, r *http.Request, owner string) error

// handle installs h on pattern behind the bearer-token check and the
// token's rate limit; the error h returns is answered in OpenAI's shape.
func (f *Facade) handle(pattern string, h ownerHandler) {
	f.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		owner, tokenID, err := f.authenticate(r.Context(), r.Header.Get("Authorization"))
		if err == nil && f.gate != nil {
			err = f.gate.Admit(r.Context(), owner, tokenID)
		}
		if err == nil {
			err = h(w, r, owner)
		}
		if err != nil {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the client is gone; nothing to answer
			}
			if f.refused != nil {
				f.refused(err)
			}
			if ae := toAPIError(err); ae.Status >= 500 {
				f.log.Error("openai facade: request failed", "path", r.URL.Path, "err", err)
			}
			writeError(w, err)
		}
	})
}

// authenticate checks a bearer token, as parley's API does: a missing,
// malformed, unknown or revoked token is a 401. It returns the token's
// owner and id.
func (f *Facade) authenticate(ctx context.Context, header string) (owner, tokenID string, err error) {
	if header == "" {
		return "", "", &apiError{Status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "missing_api_key",
			Message: "You didn't provide an API key. Send a parley token as \"Authorization: Bearer <token>\"."}
	}
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", "", &apiError{Status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "invalid_api_key",
			Message: "Malformed Authorization header: want \"Bearer <token>\"."}
	}
	owner, err = auth.Authenticate(ctx, f.st, token)
	if errors.Is(err, auth.ErrUnauthorized) {
		return "", "", &apiError{Status: http.StatusUnauthorized, Type: typeAuthentication, Code: "invalid_api_key",
			Message: "Incorrect API key provided: it is not a valid parley token, or it was revoked."}
	}
	if err != nil {
		return "", "", err
	}
	if tokenID, _, err = auth.Parse(token); err != nil {
		return "", "", err // not after Authenticate accepted it
	}
	return owner, tokenID, nil
}
