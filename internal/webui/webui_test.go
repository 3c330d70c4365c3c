package webui

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// do sends one request to Handler.
func do(method, target string, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, r)
	return w
}

// checkHeaders fails unless w carries the headers every response has.
func checkHeaders(t *testing.T, what string, w *httptest.ResponseRecorder) {
	t.Helper()
	for k, v := range map[string]string{
		"Content-Security-Policy":    CSP,
		"X-Content-Type-Options":     "nosniff",
		"X-Frame-Options":            "DENY",
		"Referrer-Policy":            "no-referrer",
		"Cross-Origin-Opener-Policy": "same-origin",
		"Cache-Control":              "no-cache",
	} {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}

func TestCSPAllowsNoInlineCode(t *testing.T) {
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "unsafe-hashes", "*", "http:", "https:"} {
		if strings.Contains(CSP, bad) {
			t.Errorf("CSP allows %s: %s", bad, CSP)
		}
	}
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"} {
		if !strings.Contains(CSP, want) {
			t.Errorf("CSP lacks %s: %s", want, CSP)
		}
	}
}

// anyFile is some embedded file under dir with extension ext, "" if none.
func anyFile(t *testing.T, dir, ext string) string {
	t.Helper()
	var found string
	fs.WalkDir(static, path.Join("static", dir), func(p string, d fs.DirEntry, err error) error {
		if err == nil && found == "" && !d.IsDir() && path.Ext(p) == ext {
			found = strings.TrimPrefix(p, "static")
		}
		return nil
	})
	return found
}

func TestContentTypes(t *testing.T) {
	for _, tc := range []struct{ dir, ext, want string }{
		{"", ".css", "text/css; charset=utf-8"},
		{"js", ".js", "text/javascript; charset=utf-8"},
		{"vendor", ".js", "text/javascript; charset=utf-8"},
		{"", ".mjs", "text/javascript; charset=utf-8"},
		{"", ".svg", "image/svg+xml"},
		{"", ".png", "image/png"},
	} {
		p := anyFile(t, tc.dir, tc.ext)
		if p == "" {
			continue // the UI has no such file (yet); the table below checks the type
		}
		w := do("GET", p, nil)
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != tc.want {
			t.Errorf("GET %s = %d %q, want 200 %q", p, w.Code, w.Header().Get("Content-Type"), tc.want)
		}
		checkHeaders(t, "GET "+p, w)
	}
	for ext, want := range map[string]string{
		".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
		".html": "text/html; charset=utf-8",
	} {
		if types[ext] != want {
			t.Errorf("%s is served as %q, want %q", ext, types[ext], want)
		}
	}
}

func TestIndex(t *testing.T) {
	page, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	get := do("GET", "/", nil)
	if get.Code != http.StatusOK || get.Header().Get("Content-Type") != "text/html; charset=utf-8" || get.Body.String() != string(page) {
		t.Fatalf("GET / = %d %q, %d bytes, want 200 text/html and index.html", get.Code, get.Header().Get("Content-Type"), get.Body.Len())
	}
	checkHeaders(t, "GET /", get)
	etag := get.Header().Get("ETag")
	if !strings.HasPrefix(etag, `"`) || len(etag) < 10 {
		t.Errorf("ETag %q, want a strong one", etag)
	}

	head := do("HEAD", "/", nil)
	if head.Code != http.StatusOK || head.Body.Len() != 0 || head.Header().Get("ETag") != etag ||
		head.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("HEAD / = %d, %d bytes, ETag %q, %q", head.Code, head.Body.Len(), head.Header().Get("ETag"), head.Header().Get("Content-Type"))
	}
	checkHeaders(t, "HEAD /", head)

	for _, inm := range []string{etag, `"other", ` + etag, "W/" + etag, "*"} {
		w := do("GET", "/", http.Header{"If-None-Match": {inm}})
		if w.Code != http.StatusNotModified || w.Body.Len() != 0 || w.Header().Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %d, %d bytes, ETag %q, want 304", inm, w.Code, w.Body.Len(), w.Header().Get("ETag"))
		}
		checkHeaders(t, "304", w)
	}
	if w := do("GET", "/", http.Header{"If-None-Match": {`"stale"`}}); w.Code != http.StatusOK || w.Body.Len() != len(page) {
		t.Errorf("a stale If-None-Match: %d, %d bytes, want 200 and the page", w.Code, w.Body.Len())
	}
}

func TestETagsDiffer(t *testing.T) {
	seen := map[string]string{}
	for p, f := range files {
		if other, ok := seen[f.etag]; ok && string(files[other].body) != string(f.body) {
			t.Errorf("%s and %s differ but share the ETag %s", p, other, f.etag)
		}
		seen[f.etag] = p
		if w := do("GET", p, nil); w.Header().Get("ETag") != f.etag || w.Code != http.StatusOK {
			t.Errorf("GET %s = %d, ETag %q, want 200 %q", p, w.Code, w.Header().Get("ETag"), f.etag)
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	for _, p := range []string{"/index.html", "/nope", "/js/", "/js", "/js/nope.js", "/vendor/", "/static/index.html", "/js/../app.css", "/api/v1/chats"} {
		w := do("GET", p, nil)
		if w.Code != http.StatusNotFound || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") || w.Header().Get("ETag") != "" {
			t.Errorf("GET %s = %d %q, ETag %q, want a plain 404", p, w.Code, w.Header().Get("Content-Type"), w.Header().Get("ETag"))
		}
		checkHeaders(t, "404 for "+p, w)
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "OPTIONS"} {
		w := do(m, "/", nil)
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s / = %d, Allow %q, want 405 GET, HEAD", m, w.Code, w.Header().Get("Allow"))
		}
		checkHeaders(t, m+" /", w)
	}
}

func TestPatterns(t *testing.T) {
	ps := Patterns()
	if !slices.Contains(ps, "GET /{$}") {
		t.Errorf("Patterns %q lack the page", ps)
	}
	mux := http.NewServeMux() // panics if two patterns conflict
	for _, p := range ps {
		mux.Handle(p, Handler())
	}
	for p := range files {
		if _, pattern := mux.Handler(httptest.NewRequest("GET", p, nil)); pattern == "" {
			t.Errorf("no pattern of %q reaches %s", ps, p)
		}
	}
}

var (
	// tag is an HTML start tag: its name and its attributes.
	tag = regexp.MustCompile(`(?s)<([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[^\s=>/]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>"']+))?)*)\s*/?>`)
	// attr is one attribute of a tag: its name and its value, quoted or not.
	attr = regexp.MustCompile(`(?s)([^\s=>/]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+)))?`)
)

// startTags are the start tags of page, with their attributes by name.
func startTags(page string) (names []string, attrs []map[string]string) {
	for _, m := range tag.FindAllStringSubmatch(page, -1) {
		as := map[string]string{}
		for _, a := range attr.FindAllStringSubmatch(m[2], -1) {
			as[strings.ToLower(a[1])] = a[2] + a[3] + a[4]
		}
		names = append(names, strings.ToLower(m[1]))
		attrs = append(attrs, as)
	}
	return names, attrs
}

// embedded is the embedded file a URL in a page at "/" loads, or why not.
func embedded(ref string) (string, bool) {
	u, err := url.Parse(ref)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "not from this origin: the CSP blocks it", false
	}
	p := path.Join("/", u.Path)
	if files[p] == nil {
		return "not embedded", false
	}
	return p, true
}

// pageProblems are what in page the CSP would block or a browser could not
// load: an inline script, style or event handler, or a script or stylesheet
// that is not embedded.
func pageProblems(page string) []string {
	var out []string
	names, attrs := startTags(page)
	scripts := 0
	for i, name := range names {
		as := attrs[i]
		for a, v := range as {
			if a == "style" {
				out = append(out, fmt.Sprintf("<%s style=%q>: the CSP blocks inline styles", name, v))
			}
			if strings.HasPrefix(a, "on") {
				out = append(out, fmt.Sprintf("<%s %s=%q>: the CSP blocks inline event handlers", name, a, v))
			}
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "javascript:") {
				out = append(out, fmt.Sprintf("<%s %s=%q>: the CSP blocks javascript: URLs", name, a, v))
			}
		}
		switch name {
		case "style":
			out = append(out, "<style>: the CSP blocks inline styles; use a stylesheet")
		case "script":
			src, ok := as["src"]
			if !ok {
				out = append(out, "<script> without src: the CSP blocks inline scripts")
				continue
			}
			scripts++
			if why, ok := embedded(src); !ok {
				out = append(out, fmt.Sprintf("<script src=%q>: %s", src, why))
			}
		case "link":
			if href, ok := as["href"]; ok {
				if why, ok := embedded(href); !ok {
					out = append(out, fmt.Sprintf("<link href=%q>: %s", href, why))
				}
			}
		}
	}
	if scripts == 0 {
		out = append(out, "the page loads no script")
	}
	// The tag regexp must see every tag: a <script> or <style> it missed
	// would escape the checks above.
	for _, el := range []string{"script", "style"} {
		n := len(regexp.MustCompile(`(?i)<`+el+`[\s/>]`).FindAllStringIndex(page, -1))
		if got := strings.Count(" "+strings.Join(names, " ")+" ", " "+el+" "); got != n {
			out = append(out, fmt.Sprintf("the page has %d <%s>, the check parsed %d", n, el, got))
		}
	}
	return out
}

// TestIndexFitsCSP: index.html loads only embedded files and has nothing
// inline that the CSP would block.
func TestIndexFitsCSP(t *testing.T) {
	b, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pageProblems(string(b)) {
		t.Error("index.html: " + p)
	}
}

func TestPageProblems(t *testing.T) {
	script := anyFile(t, "js", ".js")
	if script == "" {
		t.Skip("no script embedded yet")
	}
	ok := `<script type="module" src="` + strings.TrimPrefix(script, "/") + `"></script>`
	if got := pageProblems(ok); len(got) != 0 {
		t.Fatalf("a fine page: %q", got)
	}
	for _, bad := range []string{
		ok + `<script>alert(1)</script>`,
		ok + `<SCRIPT type="module">x()</SCRIPT>`,
		ok + `<style>p {}</style>`,
		ok + `<p style="color: red">`,
		ok + `<button onclick="x()">`,
		ok + `<a href="javascript:x()">`,
		ok + `<script src="https://cdn.example/x.js"></script>`,
		ok + `<script src="js/none.js"></script>`,
		ok + `<link rel="stylesheet" href="none.css">`,
		ok + `<link rel="stylesheet" href="//cdn.example/x.css">`,
		`<p>no script</p>`,
	} {
		if len(pageProblems(bad)) == 0 {
			t.Errorf("no problem found in %s", bad)
		}
	}
}

func TestStartTags(t *testing.T) {
	names, attrs := startTags(`<p class=a>x</p><script type="module" src='js/a.js'></script><input placeholder='[{"a": ">"}]' style="color: red"><br/>`)
	if !slices.Equal(names, []string{"p", "script", "input", "br"}) {
		t.Fatalf("names %q", names)
	}
	if attrs[0]["class"] != "a" || attrs[1]["src"] != "js/a.js" || attrs[2]["style"] != "color: red" || attrs[2]["placeholder"] != `[{"a": ">"}]` {
		t.Errorf("attrs %q", attrs)
	}
}

// importSpec finds the module specifiers of static imports and exports
// ("from" and bare import) and of dynamic import().
var importSpec = regexp.MustCompile(`(?:\bfrom\s*|\bimport\s*|\bimport\s*\(\s*)(?:"([^"]+)"|'([^']+)')`)

// TestModuleImportsResolve: every module the UI's scripts import is
// embedded, at the path the browser resolves it to. There is no import map
// (the CSP blocks inline ones), so bare names like "marked" cannot load.
func TestModuleImportsResolve(t *testing.T) {
	n := 0
	err := fs.WalkDir(static, "static/js", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (path.Ext(p) != ".js" && path.Ext(p) != ".mjs") {
			return err
		}
		n++
		src, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		from := strings.TrimPrefix(p, "static")
		for _, m := range importSpec.FindAllStringSubmatch(string(src), -1) {
			spec := m[1] + m[2]
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") && !strings.HasPrefix(spec, "/") {
				t.Errorf("%s imports %q: only ./, ../ and / paths load without an import map", from, spec)
				continue
			}
			target := path.Join(path.Dir(from), spec)
			if files[target] == nil || !strings.HasPrefix(files[target].ctype, "text/javascript") {
				t.Errorf("%s imports %q: %s is not an embedded JavaScript file", from, spec, target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("static/js has no module")
	}
}

func TestImportSpec(t *testing.T) {
	src := "import { a,\n  b } from \"./a.js\";\nimport \"../vendor/b.js\";\nexport * from './c.js';\nconst d = await import(\"./d.js\");\n" +
		"// the text from the model\nimport x from\"./e.js\""
	var got []string
	for _, m := range importSpec.FindAllStringSubmatch(src, -1) {
		got = append(got, m[1]+m[2])
	}
	if want := []string{"./a.js", "../vendor/b.js", "./c.js", "./d.js", "./e.js"}; !slices.Equal(got, want) {
		t.Errorf("specifiers %q, want %q", got, want)
	}
}
