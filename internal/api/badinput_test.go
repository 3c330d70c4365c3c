package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/store"
)

// rejectedCreates are creation bodies that must be refused, with the code
// and the details.field of the answer; maxTools is the configured limit.
func rejectedCreates(maxTools int) []struct{ name, body, code, field string } {
	obj := `{"type":"object"}`
	tool := func(name, schema string) string {
		return fmt.Sprintf(`{"name":%q,"description":"d","input_schema":%s}`, name, schema)
	}
	many := make([]string, maxTools+1)
	for i := range many {
		many[i] = tool(fmt.Sprintf("t%d", i), obj)
	}
	return []struct{ name, body, code, field string }{
		{"unknown model", `{"model":"gpt-9"}`, "unknown_model", "model"},
		{"bad label key", `{"labels":{"a b":"x"}}`, "invalid_field", "labels"},
		{"tool bad name", `{"dynamic_tools":[` + tool("get weather", obj) + `]}`, "invalid_field", "dynamic_tools[0].name"},
		{"tool duplicate name", `{"dynamic_tools":[` + tool("a", obj) + `,` + tool("a", obj) + `]}`, "invalid_field", "dynamic_tools[1].name"},
		{"tool schema not an object", `{"dynamic_tools":[` + tool("a", `{"type":"string"}`) + `]}`, "invalid_field", "dynamic_tools[0].input_schema"},
		{"tool schema not JSON Schema", `{"dynamic_tools":[` + tool("a", `{"type":"object","properties":{"x":{"type":12}}}`) + `]}`, "invalid_field", "dynamic_tools[0].input_schema"},
		{"tool schema missing", `{"dynamic_tools":[{"name":"a"}]}`, "invalid_field", "dynamic_tools[0].input_schema"},
		{"too many tools", `{"dynamic_tools":[` + strings.Join(many, ",") + `]}`, "invalid_field", "dynamic_tools"},
		{"tools glob malformed", `{"tools":["weather_*","x","github_[search"]}`, "invalid_field", "tools[2]"},
		{"tools glob empty", `{"tools":[""]}`, "invalid_field", "tools[0]"},
		{"tools glob null", `{"tools":["a",null]}`, "invalid_field", "tools[1]"},
		{"tools glob too long", `{"tools":["` + strings.Repeat("g", 129) + `"]}`, "invalid_field", "tools[0]"},
		{"too many tools globs", `{"tools":[` + strings.Repeat(`"g",`, 64) + `"g"]}`, "invalid_field", "tools"},
		{"tools not a list", `{"tools":"weather_*"}`, "invalid_field", "tools"},
		{"timeout not a duration", `{"tool_result_timeout":"forever"}`, "invalid_field", "tool_result_timeout"},
		{"timeout too short", `{"tool_result_timeout":"500ms"}`, "invalid_field", "tool_result_timeout"},
		{"timeout too long", `{"tool_result_timeout":"25h"}`, "invalid_field", "tool_result_timeout"},
		{"title too long", `{"title":"` + strings.Repeat("t", 201) + `"}`, "invalid_field", "title"},
		{"system prompt too long", `{"system_prompt":"` + strings.Repeat("s", 64<<10+1) + `"}`, "invalid_field", "system_prompt"},
		{"empty message", `{"message":"  "}`, "invalid_field", "message"},
		{"message not text", `{"message":42}`, "invalid_field", "message"},
		{"type error", `{"title":5}`, "invalid_field", "title"},
		{"nested type error", `{"dynamic_tools":[{"name":7}]}`, "invalid_field", "dynamic_tools.name"},
		{"unknown field", `{"titel":"x"}`, "invalid_field", "titel"},
		{"not an object", `[1,2]`, "invalid_json", ""},
		{"trailing data", `{} {}`, "invalid_json", ""},
		{"truncated", `{"title":`, "invalid_json", ""},
	}
}

func TestCreateRejectsBadInput(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	for _, tc := range rejectedCreates(s.cfg.Limits.MaxDynamicTools) {
		t.Run(tc.name, func(t *testing.T) {
			e := s.do("POST", "/api/v1/chats", tok, tc.body).expectError(t, http.StatusBadRequest, tc.code)
			if got, _ := e.Error.Details["field"].(string); got != tc.field {
				t.Fatalf("details.field %q, want %q (%s)", got, tc.field, e.Error.Message)
			}
		})
	}
	e := s.do("POST", "/api/v1/chats", tok, `{"model":"gpt-9"}`).expectError(t, http.StatusBadRequest, "unknown_model")
	if models := fmt.Sprint(e.Error.Details["models"]); models != "[echo fast]" || !strings.Contains(e.Error.Message, "echo, fast") {
		t.Fatalf("unknown model names the configured ones: %v / %q", models, e.Error.Message)
	}
	if l := s.listChats(tok, "?archived=any"); len(l.Chats) != 0 {
		t.Fatalf("rejected creates wrote %d chats", len(l.Chats))
	}
}

func TestMalformedJSONSaysWhere(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	cases := []struct {
		body       string
		line, col  float64
		mentioning string
	}{
		{"{\n  \"title\": \"x\",\n  \"labels\": }\n", 3, 13, "line 3, column 13"},
		{`{"title" "x"}`, 1, 10, "line 1, column 10"},
		{"{}\n  garbage", 2, 3, "line 2, column 3"},
	}
	for _, tc := range cases {
		e := s.do("POST", "/api/v1/chats", tok, tc.body).expectError(t, http.StatusBadRequest, "invalid_json")
		if e.Error.Details["line"] != tc.line || e.Error.Details["column"] != tc.col || !strings.Contains(e.Error.Message, tc.mentioning) {
			t.Errorf("%q: %q %v, want line %v column %v", tc.body, e.Error.Message, e.Error.Details, tc.line, tc.col)
		}
	}
}

func TestBodyTooLarge(t *testing.T) {
	s := newSQLite(t, func(su *setup) { su.cfg.Limits.MaxBodyBytes = 1024 })
	tok := s.token("alice")
	big := `{"title":"` + strings.Repeat("x", 2000) + `"}`
	e := s.do("POST", "/api/v1/chats", tok, big).expectError(t, http.StatusRequestEntityTooLarge, "body_too_large")
	if e.Error.Details["limit"] != float64(1024) {
		t.Fatalf("details %v", e.Error.Details)
	}
	c := s.createChat(tok, nil)
	s.do("POST", "/api/v1/chats/"+c.ID+"/messages", tok, `{"content":"`+strings.Repeat("x", 2000)+`"}`).
		expectError(t, http.StatusRequestEntityTooLarge, "body_too_large")
	s.do("PATCH", "/api/v1/chats/"+c.ID, tok, big).expectError(t, http.StatusRequestEntityTooLarge, "body_too_large")
	if got := s.get(tok, c.ID); got.Title != "" || got.Status != "waiting" {
		t.Fatalf("an oversized request changed the chat: %+v", got)
	}
	if l := s.listChats(tok, ""); len(l.Chats) != 1 {
		t.Fatalf("%d chats, want 1", len(l.Chats))
	}
}

func TestUnauthorized(t *testing.T) {
	s := newSQLite(t)
	good := s.token("alice")
	revoked, tok, err := auth.Issue(context.Background(), s.st, "alice", "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.st.InTx(context.Background(), func(tx store.Tx) error { return tx.RevokeToken(context.Background(), tok.ID) }); err != nil {
		t.Fatal(err)
	}
	unknown, _, _ := auth.New()
	headers := map[string]string{
		"missing":             "",
		"not bearer":          "Basic YWxpY2U6cHc=",
		"bearer without one":  "Bearer ",
		"malformed token":     "Bearer not-a-parley-token",
		"unknown token":       "Bearer " + unknown,
		"revoked token":       "Bearer " + revoked,
		"wrong secret":        "Bearer " + good[:len(good)-2] + "xx",
		"token without space": "Bearer" + good,
	}
	routes := [][2]string{{"GET", "/api/v1/chats"}, {"POST", "/api/v1/chats"}, {"GET", "/api/v1/models"}, {"GET", "/api/v1/tools"},
		{"GET", "/api/v1/chats/watch"}, {"GET", "/api/v1/chats/0190a0b4-1d2e-7f00-8000-000000000000"}}
	for name, h := range headers {
		for _, rt := range routes {
			req, _ := http.NewRequest(rt[0], s.url+rt[1], strings.NewReader("{}"))
			if h != "" {
				req.Header.Set("Authorization", h)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r := readAll(t, res)
			e := r.expectError(t, http.StatusUnauthorized, "unauthorized")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%s on %s: no WWW-Authenticate (%v)", name, rt[1], e)
			}
		}
	}
	if l := s.listChats(good, ""); len(l.Chats) != 0 {
		t.Fatal("unauthorized requests created chats")
	}
	req, _ := http.NewRequest("GET", s.url+"/api/v1/chats", nil)
	req.Header.Set("Authorization", "bearer "+good)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res).expect(t, http.StatusOK, nil) // the scheme is case-insensitive
}

func readAll(t *testing.T, res *http.Response) response {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}
