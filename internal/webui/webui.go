// Package webui serves parley's web UI, embedded in the binary.
//
// The UI is plain ES modules (static/js) and vendored libraries
// (static/vendor), with no build step: the files in static/ are what the
// browser loads. It talks to the server only through the public HTTP API,
// with the owner's bearer token, like any other client; serving it gives
// no other access. The token comes from the login form, or from the link
// "parley serve" prints on its first start (/#token=..., in the URL
// fragment, which browsers never send to the server).
//
// Every response carries a strict Content-Security-Policy: scripts, styles,
// fonts and connections from this origin only, and no inline script or
// style, so text from a chat cannot run as code in the page.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every response: nothing from other
// origins, no inline code, no framing. Images may be blob: URLs: attached
// images are fetched with the bearer token and shown from the bytes.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; font-src 'self'; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// headers are set on every response, errors included.
var headers = map[string]string{
	"Content-Security-Policy":    CSP,
	"X-Content-Type-Options":     "nosniff",
	"X-Frame-Options":            "DENY",
	"Referrer-Policy":            "no-referrer",
	"Cross-Origin-Opener-Policy": "same-origin",
	// Revalidate every time: the ETag makes that a 304 while the binary
	// is the same, and a new binary's files are seen at once.
	"Cache-Control": "no-cache",
}

// types are the Content-Types by file extension. They are fixed here
// rather than read from the system's MIME tables, which vary and may not
// know .mjs; a browser refuses a module that is not served as JavaScript.
var types = map[string]string{
	".html":        "text/html; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".json":        "application/json",
	".map":         "application/json",
	".webmanifest": "application/manifest+json",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".ico":         "image/x-icon",
	".woff2":       "font/woff2",
	".woff":        "font/woff",
	".txt":         "text/plain; charset=utf-8",
}

// file is one embedded file, ready to serve.
type file struct {
	body  []byte
	ctype string
	etag  string // strong: a hash of body
}

// files are the embedded files by URL path; index.html is at "/" only.
var files = load()

func load() map[string]*file {
	m := map[string]*file{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		ctype, ok := types[path.Ext(p)]
		if !ok {
			ctype = "application/octet-stream"
		}
		sum := sha256.Sum256(b)
		urlPath := strings.TrimPrefix(p, "static")
		if urlPath == "/index.html" {
			urlPath = "/"
		}
		m[urlPath] = &file{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
		return nil
	})
	if err != nil {
		panic("webui: read the embedded files: " + err.Error())
	}
	return m
}

// Handler serves the UI: "/" is the page, every other embedded file is at
// its path under static/, anything else is 404. Only GET and HEAD.
func Handler() http.Handler { return http.HandlerFunc(serve) }

func serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	for k, v := range headers {
		h.Set(k, v)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	f := files[r.URL.Path]
	if f == nil {
		http.NotFound(w, r)
		return
	}
	h.Set("Content-Type", f.ctype)
	h.Set("ETag", f.etag)
	// ServeContent answers If-None-Match with 304, HEAD and ranges.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}

// Patterns are the ServeMux patterns that reach every file Handler serves:
// "GET /{$}" for the page and one per other top-level file or directory.
// A server that answers other paths itself (its API's 404s, say) mounts the
// UI on these rather than on "GET /".
func Patterns() []string {
	entries, err := static.ReadDir("static")
	if err != nil {
		panic("webui: read the embedded files: " + err.Error())
	}
	var ps []string
	for _, e := range entries {
		switch {
		case e.IsDir():
			ps = append(ps, "GET /"+e.Name()+"/")
		case e.Name() == "index.html":
			ps = append(ps, "GET /{$}")
		default:
			ps = append(ps, "GET /"+e.Name())
		}
	}
	sort.Strings(ps)
	return ps
}
