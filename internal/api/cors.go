package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/parleyhq/parley/internal/facade"
)

// cors answers the CORS preflight of /api and /v1 and marks the answers of
// allowed origins (config cors.allowed_origins): the origin is echoed,
// never "*", with Vary: Origin. Other origins get no CORS headers, so the
// browser keeps its answers from the page.
func (a *api) cors(next http.Handler) http.Handler {
	allowed := a.cfg.CORS.AllowedOrigins
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") && !strings.HasPrefix(r.URL.Path, facade.Prefix) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		ok := origin != "" && slices.Contains(allowed, origin)
		if ok {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", "X-Vercel-Ai-Ui-Message-Stream")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			if ok {
				h := w.Header()
				h.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
				h.Set("Access-Control-Max-Age", "600")
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
