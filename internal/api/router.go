package api

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/parleyhq/parley/internal/facade"
	"github.com/parleyhq/parley/internal/webui"
)

// handler is an HTTP handler that returns its error, answered in one place.
type handler func(w http.ResponseWriter, r *http.Request) error

// register installs every route.
func (a *api) register() {
	a.handle("GET /healthz", a.healthz)
	a.handle("GET /readyz", a.readyz)
	a.routes["GET /metrics"] = true
	a.mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))

	const v1 = "/api/v1"
	a.handle("GET "+v1+"/models", a.authed(a.listModels))
	a.handle("GET "+v1+"/tools", a.authed(a.listTools))
	a.handle("POST "+v1+"/chats", a.authed(a.createChat))
	a.handle("GET "+v1+"/chats", a.authed(a.listChats))
	a.handle("GET "+v1+"/chats/watch", a.authed(a.watch))
	a.handle("GET "+v1+"/chats/streams", a.authed(a.streams))
	a.handle("GET "+v1+"/chats/{id}", a.authed(a.getChat))
	a.handle("PATCH "+v1+"/chats/{id}", a.authed(a.patchChat))
	a.handle("DELETE "+v1+"/chats/{id}", a.authed(a.deleteChat))
	a.handle("GET "+v1+"/chats/{id}/messages", a.authed(a.listMessages))
	a.handle("POST "+v1+"/chats/{id}/messages", a.authed(a.postMessage))
	a.handle("GET "+v1+"/chats/{id}/queued", a.authed(a.listQueued))
	a.handle("POST "+v1+"/chats/{id}/interrupt", a.authed(a.interrupt))
	a.handle("POST "+v1+"/chats/{id}/retry", a.authed(a.retry))
	a.handle("POST "+v1+"/chats/{id}/compact", a.authed(a.compact))
	a.handle("POST "+v1+"/chats/{id}/regenerate", a.authed(a.regenerate))
	a.handle("POST "+v1+"/chats/{id}/fork", a.authed(a.fork))
	a.handle("PATCH "+v1+"/chats/{id}/messages/{message_id}", a.authed(a.editMessage))
	a.handle("GET "+v1+"/chats/{id}/messages/{message_id}/versions", a.authed(a.messageVersions))
	a.handle("POST "+v1+"/chats/{id}/tool-results", a.authed(a.submitToolResults))
	a.handle("POST "+v1+"/chats/{id}/approvals", a.authed(a.submitApprovals))
	a.handle("GET "+v1+"/chats/{id}/stream", a.authed(a.stream))
	a.handle("GET "+v1+"/owners/{owner}/quotas", a.authed(a.getQuotas))
	a.handle("PUT "+v1+"/owners/{owner}/quotas", a.authed(a.putQuotas))
	a.handle("GET "+v1+"/usage", a.authed(a.usage))
	a.handle("POST "+v1+"/files", a.authed(a.uploadFile))
	a.handle("GET "+v1+"/files", a.authed(a.listFiles))
	a.handle("GET "+v1+"/files/{file_id}", a.authed(a.getFile))
	a.handle("DELETE "+v1+"/files/{file_id}", a.authed(a.deleteFile))
	a.handle("GET "+v1+"/files/{file_id}/content", a.authed(a.fileContent))
	a.handle("GET "+v1+"/chats/{id}/files/{file_id}/content", a.authed(a.chatFileContent))
	a.handle("GET "+v1+"/tokens", a.authed(a.listTokens))
	a.handle("POST "+v1+"/tokens", a.authed(a.createToken))
	a.handle("DELETE "+v1+"/tokens/{id}", a.authed(a.revokeToken))
	a.handle("POST "+v1+"/ai-sdk/chat", a.authed(a.aisdkChat))
	a.handle("GET "+v1+"/ai-sdk/chat/{id}/stream", a.authed(a.aisdkStream))
	a.handle("GET "+v1+"/ai-sdk/chat/{id}/messages", a.authed(a.aisdkMessages))
	a.handle("POST "+v1+"/ai-sdk/chat/{id}/interrupt", a.authed(a.aisdkInterrupt))
	a.handle("POST "+v1+"/agents", a.authed(a.createAgent))
	a.handle("GET "+v1+"/agents", a.authed(a.listAgents))
	a.handle("GET "+v1+"/agents/{name}", a.authed(a.getAgent))
	a.handle("PUT "+v1+"/agents/{name}", a.authed(a.putAgent))
	a.handle("PATCH "+v1+"/agents/{name}", a.authed(a.patchAgent))
	a.handle("DELETE "+v1+"/agents/{name}", a.authed(a.deleteAgent))
	a.handle("GET "+v1+"/agents/{name}/versions", a.authed(a.agentVersions))
	a.handle("POST "+v1+"/webhooks", a.authed(a.createWebhook))
	a.handle("GET "+v1+"/webhooks", a.authed(a.listWebhooks))
	a.handle("GET "+v1+"/webhooks/{id}", a.authed(a.getWebhook))
	a.handle("PATCH "+v1+"/webhooks/{id}", a.authed(a.patchWebhook))
	a.handle("DELETE "+v1+"/webhooks/{id}", a.authed(a.deleteWebhook))
	a.handle("POST "+v1+"/webhooks/{id}/rotate-secret", a.authed(a.rotateWebhookSecret))
	a.handle("GET "+v1+"/webhooks/{id}/deliveries", a.authed(a.listDeliveries))
	a.handle("POST "+v1+"/webhooks/{id}/deliveries/{delivery_id}/redeliver", a.authed(a.redeliver))
	a.handle("POST "+v1+"/webhooks/{id}/redeliver-failed", a.authed(a.redeliverFailed))

	// The OpenAI-compatible facade answers everything under /v1/ itself.
	a.routes[facade.Prefix] = true
	a.mux.Handle(facade.Prefix, a.facade)

	// The web UI, on its own paths rather than on "GET /": that would
	// conflict with the facade's method-less /v1/, and every other path
	// keeps the API's error body (an unknown /api/ route is a JSON 404).
	ui := webui.Handler()
	for _, p := range webui.Patterns() {
		a.routes[p] = true
		a.mux.Handle(p, ui)
	}
}

// handle installs h on pattern and records the pattern as a route label.
func (a *api) handle(pattern string, h handler) {
	a.routes[pattern] = true
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeError(w, err)
		}
	})
}
