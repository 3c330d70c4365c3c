package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// curlExample is one curl command of a document's sh blocks.
type curlExample struct {
	path string // the URL after $PARLEY
	body string // the -d body, "" for a GET
}

var (
	shBlock  = regexp.MustCompile("(?s)```sh\n(.*?)```")
	curlURL  = regexp.MustCompile(`\$PARLEY(/\S+)`)
	curlBody = regexp.MustCompile(`(?s) -d '(.*?)'`)
)

// curlExamples returns the curl commands of the sh blocks of a document, a
// command's continued lines ("\" at the end) joined.
func curlExamples(t *testing.T, doc string) []curlExample {
	t.Helper()
	var out []curlExample
	for _, block := range shBlock.FindAllStringSubmatch(doc, -1) {
		text := strings.ReplaceAll(block[1], "\\\n", " ")
		// A quoted body may go on over lines of its own.
		var cmds []string
		for _, line := range strings.Split(text, "\n") {
			switch {
			case strings.HasPrefix(line, "curl "):
				cmds = append(cmds, line)
			case len(cmds) > 0 && strings.Count(cmds[len(cmds)-1], "'")%2 == 1:
				cmds[len(cmds)-1] += "\n" + line
			}
		}
		for _, c := range cmds {
			u := curlURL.FindStringSubmatch(c)
			if u == nil {
				t.Fatalf("a curl example without $PARLEY: %s", c)
			}
			ex := curlExample{path: u[1]}
			if b := curlBody.FindStringSubmatch(c); b != nil {
				ex.body = b[1]
			}
			out = append(out, ex)
		}
	}
	return out
}

// TestOpenAICompatExamples runs the curl examples of docs/openai-compat.md,
// as written, against a server started as the quick start does (the default
// configuration): each one succeeds. A continued conversation's
// previous_response_id stands for the id of the answer before it.
func TestOpenAICompatExamples(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "openai-compat.md"))
	if err != nil {
		t.Fatal(err)
	}
	examples := curlExamples(t, string(raw))
	if len(examples) < 6 {
		t.Fatalf("found %d curl examples, want the 6 or more the document has", len(examples))
	}
	s := startServe(t, t.TempDir(), nil)
	placeholder := regexp.MustCompile(`"resp_[^"]*…[^"]*"`)
	lastResponse := ""
	for _, ex := range examples {
		body := ex.body
		if placeholder.MatchString(body) {
			if lastResponse == "" {
				t.Fatalf("%s %s: no answer before it to continue", ex.path, body)
			}
			body = placeholder.ReplaceAllString(body, `"`+lastResponse+`"`)
		}
		method := http.MethodGet
		if body != "" {
			if !json.Valid([]byte(body)) {
				t.Errorf("%s: the body is not JSON: %s", ex.path, body)
				continue
			}
			method = http.MethodPost
		}
		code, out := do(t, method, s.URL+ex.path, s.Token, body)
		if code != http.StatusOK {
			t.Errorf("%s %s %s: %d %s", method, ex.path, body, code, out)
			continue
		}
		var v struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		}
		if strings.Contains(body, `"stream": true`) {
			if !strings.Contains(out, "data: ") {
				t.Errorf("%s %s: not an event stream: %s", ex.path, body, out)
			}
			continue
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("%s %s: %v: %s", ex.path, body, err, out)
			continue
		}
		if v.Object == "response" {
			lastResponse = v.ID
		}
	}
}
