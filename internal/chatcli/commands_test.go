package chatcli

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// compactedLine is what /compact prints once the chat is compacted.
var compactedLine = regexp.MustCompile(`compacted: [1-9][0-9]* tokens before\n`)

// TestChatSessionCommands: the commands of an interactive session. /help
// lists them and is not sent; before the first message there is no chat to
// act on; /compact with one turn says there is nothing to compact, with two
// it compacts and tells the tokens before; /edit replaces the last message
// and shows the new answer; /retry answers it again; none of them reaches
// the model as a message.
func TestChatSessionCommands(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil, nil)
	p := startChat(t, Options{URL: s.url, Token: s.token})

	p.send("/help")
	p.waitFor(p.stderr, "  /retry ")
	for _, c := range []string{"/compact", "/edit TEXT", "/help", "/exit"} {
		if !strings.Contains(p.stderr.String(), "\n  "+c+" ") {
			t.Errorf("/help does not list %s:\n%s", c, p.stderr)
		}
	}
	p.send("/compact")
	p.waitFor(p.stderr, "/compact: there is no chat yet; send a message first\n")

	p.send("first")
	p.waitFor(p.stdout, "echo: first\n")
	id := p.waitChatID()
	p.send("/compact")
	p.waitFor(p.stderr, "/compact: nothing to compact")

	p.send("second")
	p.waitFor(p.stdout, "echo: second\n")
	p.send("/compact")
	if held, ended := p.stderr.Wait(compactedLine.MatchString, p.exited, deadline); !held {
		t.Fatalf("/compact printed no compaction (session ended: %v)\nstderr:\n%s", ended, p.stderr)
	}

	p.send("/edit second, edited")
	p.waitFor(p.stdout, "echo: second, edited\n")
	p.send("/retry")
	p.waitFor(p.stdout, "echo: second, edited\necho: second, edited\n")
	p.send("/edit")
	p.waitFor(p.stderr, "/edit: give the new text of your last message")
	if err := p.wait(); err != nil {
		t.Fatalf("the session ended with %v\nstderr:\n%s", err, p.stderr)
	}
	if got, want := p.stdout.String(), "echo: first\necho: second\necho: second, edited\necho: second, edited\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}

	// The history holds the messages and the compaction, nothing of the
	// commands; the edited message's earlier text and the answers edited
	// and regenerated away are superseded.
	code, body := do(t, http.MethodGet, s.url+"/api/v1/chats/"+id+"/messages?superseded=true", s.token, "")
	if code != http.StatusOK {
		t.Fatalf("messages: %d %s", code, body)
	}
	for _, c := range []string{"/help", "/compact", "/edit", "/retry"} {
		if strings.Contains(body, c) {
			t.Errorf("the command %s reached the chat: %s", c, body)
		}
	}
	if strings.Count(body, `"role":"user"`) != 3 || !strings.Contains(body, `"text":"second"}],"created_at"`) || strings.Count(body, `"type":"compaction"`) < 1 ||
		strings.Count(body, `"superseded":true`) < 2 || !strings.Contains(body, `"text":"second, edited"`) {
		t.Errorf("messages: %s", body)
	}
}

// TestChatSessionRetryAfterFailure: a chat that fails does not end an
// interactive session; /retry runs it again and its answer shows. A
// session whose chat failed last exits with the error.
func TestChatSessionRetryAfterFailure(t *testing.T) {
	t.Parallel()
	fake := llmtest.NewOpenAIChat(t)
	fake.Push(
		llmtest.Turn{Status: http.StatusBadRequest, ErrorMessage: "the request is invalid"},
		llmtest.Turn{Text: "the answer at last"},
		llmtest.Turn{Status: http.StatusBadRequest, ErrorMessage: "the request is invalid again"},
	)
	s := newServer(t, map[string]string{"FAKE_OPENAI_KEY": "test-key"}, func(cfg *config.Config) {
		cfg.Models = []config.Model{{Name: "fake", Provider: "openai", Model: "gpt-test", BaseURL: fake.URL, APIKeyEnv: "FAKE_OPENAI_KEY"}}
		cfg.DefaultModel = "fake"
	})
	// A title of its own: the model is not asked for one, so it gets the
	// chat's requests alone.
	code, body := do(t, http.MethodPost, s.url+"/api/v1/chats", s.token, `{"title":"retries"}`)
	var ch struct{ ID string }
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &ch) != nil || ch.ID == "" {
		t.Fatalf("create the chat: %d %s", code, body)
	}

	p := startChat(t, Options{URL: s.url, Token: s.token, ChatID: ch.ID})
	p.send("hello")
	p.waitFor(p.stderr, "(/retry tries again)\n")
	if !strings.Contains(p.stderr.String(), "the chat failed (bad_request): the request is invalid") {
		t.Fatalf("the failure is not shown:\n%s", p.stderr)
	}
	p.send("/retry")
	p.waitFor(p.stdout, "the answer at last\n")
	if err := p.wait(); err != nil {
		t.Fatalf("the session ended with %v after a successful retry\nstderr:\n%s", err, p.stderr)
	}

	p = startChat(t, Options{URL: s.url, Token: s.token, ChatID: ch.ID})
	p.send("hello again")
	p.waitFor(p.stderr, "(/retry tries again)\n")
	if err := p.wait(); err == nil || !strings.Contains(err.Error(), "the request is invalid again") {
		t.Fatalf("the session ended with %v with its chat in error, want that error\nstderr:\n%s", err, p.stderr)
	}
	if n := len(fake.Requests()); n != 3 {
		t.Errorf("the model got %d requests, want 3", n)
	}
}
