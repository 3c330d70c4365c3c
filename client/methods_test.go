package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
)

// weatherTool is a dynamic tool declared by hand.
var weatherTool = client.DynamicTool{Name: "get_weather", Description: "Current weather for a city",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}

// apiError unwraps err into the *APIError it must be, with status and code.
func apiError(t *testing.T, err error, status int, code string) *client.APIError {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want an *APIError", err, err)
	}
	if ae.StatusCode != status || ae.Code != code || ae.Message == "" {
		t.Fatalf("APIError %+v, want %d %s with a message", ae, status, code)
	}
	if !client.IsStatus(err, status) {
		t.Fatalf("IsStatus(%v, %d) = false", err, status)
	}
	return ae
}

func TestModelsAndTools(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	models, err := c.Models(ctx)
	if err != nil {
		t.Fatal(err)
	}
	window := int64(100_000)
	if want := []client.Model{{Name: "echo", Provider: "echo", Model: "echo", Default: true, Inputs: []string{"text", "image", "pdf"}, ContextWindow: &window},
		{Name: "ghost", Provider: "echo", Model: "echo", Inputs: []string{"text", "image", "pdf"}}}; !reflect.DeepEqual(models, want) {
		t.Errorf("models %+v, want %+v", models, want)
	}
	tools, err := c.Tools(ctx)
	if err != nil || tools == nil || len(tools) != 0 {
		t.Errorf("tools %+v, %v; want an empty list", tools, err)
	}
}

func TestChatLifecycle(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)

	created, err := c.CreateChat(ctx, client.CreateChatRequest{
		Title: "Weather", SystemPrompt: "Be brief.", Labels: map[string]string{"source": "test"},
		DynamicTools: []client.DynamicTool{weatherTool}, ToolResultTimeout: 90 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if created.Status != client.StatusWaiting || created.Title != "Weather" || created.SystemPrompt != "Be brief." ||
		created.Model != "echo" || created.Owner != "alice" || created.Labels["source"] != "test" ||
		len(created.DynamicTools) != 1 || created.DynamicTools[0].Name != "get_weather" || created.CreatedAt.IsZero() {
		t.Fatalf("created %+v", created)
	}
	other, err := c.CreateChat(ctx, client.CreateChatRequest{Message: "hello there"})
	if err != nil {
		t.Fatal(err)
	}
	if other.Status != client.StatusPending || other.Title != "hello there" {
		t.Fatalf("created with a message: %+v", other)
	}

	got, err := c.GetChat(ctx, created.ID)
	if err != nil || got.ID != created.ID || got.Title != "Weather" {
		t.Fatalf("get: %+v, %v", got, err)
	}

	// List: filters and pages.
	page, err := c.ListChats(ctx, client.ListChatsOptions{Labels: map[string]string{"source": "test"}})
	if err != nil || len(page.Chats) != 1 || page.Chats[0].ID != created.ID || page.NextCursor != "" {
		t.Fatalf("list by label: %+v, %v", page, err)
	}
	page, err = c.ListChats(ctx, client.ListChatsOptions{Limit: 1})
	if err != nil || len(page.Chats) != 1 || page.Chats[0].ID != other.ID || page.NextCursor == "" {
		t.Fatalf("first page of 1: %+v, %v", page, err)
	}
	page, err = c.ListChats(ctx, client.ListChatsOptions{Limit: 1, Cursor: page.NextCursor})
	if err != nil || len(page.Chats) != 1 || page.Chats[0].ID != created.ID {
		t.Fatalf("second page of 1: %+v, %v", page, err)
	}
	all, err := c.AllChats(ctx, client.ListChatsOptions{Limit: 1})
	if err != nil || len(all) != 2 {
		t.Fatalf("all chats: %d, %v", len(all), err)
	}

	// Patch: title, labels removed with {}, archived.
	title, archived := "Renamed", true
	patched, err := c.UpdateChat(ctx, created.ID, client.ChatPatch{Title: &title, Labels: map[string]string{}, Archived: &archived})
	if err != nil || patched.Title != "Renamed" || len(patched.Labels) != 0 || !patched.Archived {
		t.Fatalf("patch: %+v, %v", patched, err)
	}
	page, err = c.ListChats(ctx, client.ListChatsOptions{Archived: client.ArchivedOnly})
	if err != nil || len(page.Chats) != 1 || page.Chats[0].ID != created.ID {
		t.Fatalf("archived only: %+v, %v", page, err)
	}
	page, err = c.ListChats(ctx, client.ListChatsOptions{Statuses: []string{client.StatusWaiting}, Archived: client.ArchivedAny})
	if err != nil {
		t.Fatal(err)
	}

	// Messages: a turn with the echo model, then reading it back.
	res, err := c.PostMessage(ctx, created.ID, client.PostMessageRequest{Content: "ping"})
	if err != nil || res.Message == nil || res.Queued != nil || res.Message.Role != client.RoleUser || res.Message.Text() != "ping" {
		t.Fatalf("post: %+v, %v", res, err)
	}
	waitStatus(t, c, created.ID, client.StatusWaiting)
	msgs, err := c.ListMessages(ctx, created.ID, 0, 0)
	if err != nil || len(msgs) != 2 || msgs[1].Role != client.RoleAssistant || msgs[1].Text() != "echo: ping" || msgs[1].Usage == nil {
		t.Fatalf("messages: %+v, %v", msgs, err)
	}
	after, err := c.ListMessages(ctx, created.ID, msgs[0].ID, 1)
	if err != nil || len(after) != 1 || after[0].ID != msgs[1].ID {
		t.Fatalf("messages after the first: %+v, %v", after, err)
	}
	whole, err := c.AllMessages(ctx, created.ID, 0)
	if err != nil || len(whole) != 2 {
		t.Fatalf("all messages: %+v, %v", whole, err)
	}

	// Retry only from error.
	_, err = c.Retry(ctx, created.ID)
	if ae := apiError(t, err, http.StatusConflict, "status_conflict"); ae.Details["status"] != client.StatusWaiting {
		t.Errorf("retry details %+v", ae.Details)
	}

	// Delete, then the chat is gone.
	if err := c.DeleteChat(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetChat(ctx, created.ID)
	apiError(t, err, http.StatusNotFound, "not_found")
}

// TestToolResultsAndBusyChat drives a chat into requires_action with the
// echo model's /call and walks the routes that depend on it.
func TestToolResultsAndBusyChat(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: []client.DynamicTool{weatherTool},
		Message: `/call get_weather {"city":"Paris"}`, ToolResultTimeout: 90 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ch = waitStatus(t, c, ch.ID, client.StatusRequiresAction)
	ra := ch.RequiredAction
	if ra == nil || len(ra.ToolCalls) != 1 || ra.ToolCalls[0].ToolName != "get_weather" ||
		string(ra.ToolCalls[0].Args) != `{"city":"Paris"}` {
		t.Fatalf("required_action %+v", ra)
	}
	if left := time.Until(ra.Deadline); left < 89*time.Minute || left > 90*time.Minute {
		t.Errorf("deadline in %s, want the chat's tool_result_timeout of 90m", left)
	}
	id := ra.ToolCalls[0].ToolCallID

	// A busy chat: reject is a 409 naming the status, queue queues.
	_, err = c.PostMessage(ctx, ch.ID, client.PostMessageRequest{Content: "later", Busy: client.BusyReject})
	if ae := apiError(t, err, http.StatusConflict, "chat_busy"); ae.Details["status"] != client.StatusRequiresAction {
		t.Errorf("busy details %+v", ae.Details)
	}
	res, err := c.PostMessage(ctx, ch.ID, client.PostMessageRequest{Content: "later"})
	if err != nil || res.Queued == nil || res.Message != nil {
		t.Fatalf("queued post: %+v, %v", res, err)
	}

	// Results that do not match: 400 naming the ids.
	_, err = c.SubmitToolResults(ctx, ch.ID, []client.ToolResult{client.TextResult(id, "a"), client.TextResult(id, "b"), client.TextResult("nope", "c")})
	ae := apiError(t, err, http.StatusBadRequest, "invalid_tool_results")
	if !reflect.DeepEqual(ae.Details["duplicate"], []any{id}) || !reflect.DeepEqual(ae.Details["unknown"], []any{"nope"}) {
		t.Errorf("details %+v", ae.Details)
	}
	_, err = c.SubmitToolResults(ctx, ch.ID, nil)
	if ae := apiError(t, err, http.StatusBadRequest, "invalid_tool_results"); !reflect.DeepEqual(ae.Details["missing"], []any{id}) {
		t.Errorf("details %+v", ae.Details)
	}

	// The right results: 200, and a second submission is a 409.
	after, err := c.SubmitToolResults(ctx, ch.ID, []client.ToolResult{{ToolCallID: id, Output: json.RawMessage(`{"temp_c":21}`)}})
	if err != nil || after.Status != client.StatusPending {
		t.Fatalf("submit: %+v, %v", after, err)
	}
	_, err = c.SubmitToolResults(ctx, ch.ID, []client.ToolResult{client.TextResult(id, "again")})
	if ae := apiError(t, err, http.StatusConflict, "status_conflict"); ae.Details["status"] == client.StatusRequiresAction {
		t.Errorf("second submit details %+v", ae.Details)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	msgs, err := c.AllMessages(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range msgs {
		if m.Role == client.RoleAssistant && m.Text() != "" {
			texts = append(texts, m.Text())
		}
	}
	if want := []string{`tool get_weather returned {"temp_c":21}`, "echo: later"}; !reflect.DeepEqual(texts, want) {
		t.Errorf("answers %q, want %q", texts, want)
	}
}

func TestInterruptCancelsOpenCalls(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: []client.DynamicTool{weatherTool},
		Message: `/call get_weather {"city":"Oslo"}`})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusRequiresAction)
	got, err := c.Interrupt(ctx, ch.ID)
	if err != nil || got.Status != client.StatusWaiting || got.RequiredAction != nil {
		t.Fatalf("interrupt: %+v, %v", got, err)
	}
	msgs, err := c.AllMessages(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := msgs[len(msgs)-1].Parts[0]
	if last.Type != client.PartToolResult || !last.IsError || !strings.Contains(string(last.Output), "cancelled") {
		t.Errorf("last part %+v, want a cancelled error result", last)
	}
}

// TestRetryAndErrorEvents: a chat whose run fails shows its last_error, on
// the chat and on its stream; retry runs it again.
func TestRetryAndErrorEvents(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Model: "ghost"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Stream(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs := events(st)
	until(t, evs, statusIs(client.StatusWaiting)) // connected: error events are live only
	if _, err := c.PostMessage(ctx, ch.ID, client.PostMessageRequest{Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	isError := func(ev client.ChatEvent) bool { return ev.Kind == client.EventError }
	// The status comes first, then the error event.
	for _, got := range [][]client.ChatEvent{until(t, evs, isError), nil} {
		if got == nil {
			again, err := c.Retry(ctx, ch.ID)
			if err != nil || again.Status != client.StatusPending || again.LastError != nil {
				t.Fatalf("retry: %+v, %v", again, err)
			}
			got = until(t, evs, isError)
		}
		last, status := got[len(got)-1], got[len(got)-2]
		if last.Error.Kind != "unknown_model" || last.Error.Message == "" {
			t.Errorf("error event %+v", last.Error)
		}
		if status.Status != client.StatusError || status.Chat.LastError == nil || status.Chat.LastError.Kind != "unknown_model" {
			t.Errorf("status event before the error: %+v", status)
		}
	}
}

func TestErrorDecoding(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testCtx(t)

	_, err := client.New(s.url, "prl_bad_token").ListChats(ctx, client.ListChatsOptions{})
	apiError(t, err, http.StatusUnauthorized, "unauthorized")
	if !strings.Contains(err.Error(), "GET /api/v1/chats") {
		t.Errorf("error %q does not name the request", err)
	}

	_, err = s.client().CreateChat(ctx, client.CreateChatRequest{Model: "nope"})
	if ae := apiError(t, err, http.StatusBadRequest, "unknown_model"); ae.Details["model"] != "nope" {
		t.Errorf("details %+v", ae.Details)
	}
	_, err = s.client().CreateChat(ctx, client.CreateChatRequest{DynamicTools: []client.DynamicTool{weatherTool, weatherTool}})
	if ae := apiError(t, err, http.StatusBadRequest, "invalid_field"); ae.Details["field"] != "dynamic_tools[1].name" {
		t.Errorf("details %+v", ae.Details)
	}

	// A body that is not the API's error shape (a proxy's page).
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer proxy.Close()
	_, err = client.New(proxy.URL, "t").GetChat(ctx, "x")
	if ae := apiError(t, err, http.StatusBadGateway, "http_502"); !strings.Contains(ae.Message, "bad gateway") {
		t.Errorf("message %q", ae.Message)
	}

	// No server at all: a plain error, not an APIError.
	_, err = client.New("http://127.0.0.1:1", "t").Models(ctx)
	var ae *client.APIError
	if err == nil || errors.As(err, &ae) {
		t.Errorf("unreachable server: %v", err)
	}
	if _, err := client.New("not a url", "t").Models(context.Background()); err == nil {
		t.Error("a bad base URL gave no error")
	}
}

func TestCreateChatToolSelection(t *testing.T) {
	t.Parallel()
	s := newServer(t) // no server-side tools: every glob matches nothing
	c, ctx := s.client(), testCtx(t)

	sel, err := c.CreateChat(ctx, client.CreateChatRequest{Tools: []string{"weather_*", "github_search_issues"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`tools[0] "weather_*" matches no server-side tool now`, `tools[1] "github_search_issues" matches no server-side tool now`}
	if !reflect.DeepEqual(sel.Tools, []string{"weather_*", "github_search_issues"}) || !reflect.DeepEqual(sel.Warnings, want) {
		t.Fatalf("created: tools %q, warnings %q", sel.Tools, sel.Warnings)
	}
	got, err := c.GetChat(ctx, sel.ID)
	if err != nil || !reflect.DeepEqual(got.Tools, sel.Tools) || got.Warnings != nil {
		t.Fatalf("get: %+v, %v", got, err)
	}

	all, err := c.CreateChat(ctx, client.CreateChatRequest{})
	if err != nil || all.Tools != nil || all.Warnings != nil {
		t.Fatalf("created without tools: %+v, %v", all, err)
	}
	none, err := c.CreateChat(ctx, client.CreateChatRequest{Tools: []string{}})
	if err != nil || none.Tools == nil || len(none.Tools) != 0 || none.Warnings != nil {
		t.Fatalf("created with no server-side tools: tools %#v, warnings %q, %v", none.Tools, none.Warnings, err)
	}

	_, err = c.CreateChat(ctx, client.CreateChatRequest{Tools: []string{"weather_["}})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "invalid_field" || apiErr.Details["field"] != "tools[0]" {
		t.Fatalf("a malformed glob: %v", err)
	}
}

func TestCreateChatRequestTools(t *testing.T) {
	for _, tc := range []struct {
		tools []string
		want  string
	}{
		{nil, `{}`},
		{[]string{}, `{"tools":[]}`},
		{[]string{"a_*"}, `{"tools":["a_*"]}`},
	} {
		b, err := json.Marshal(client.CreateChatRequest{Tools: tc.tools})
		if err != nil || string(b) != tc.want {
			t.Errorf("tools %#v: %s, %v; want %s", tc.tools, b, err, tc.want)
		}
	}
}

// TestOutputSchema declares a tool with an output_schema: the chat shows it,
// a result that fails it is refused with invalid_output, and one that
// satisfies it is taken.
func TestOutputSchema(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	tool := weatherTool
	tool.OutputSchema = json.RawMessage(`{"type":"object","properties":{"temp_c":{"type":"number"}},"required":["temp_c"]}`)
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{DynamicTools: []client.DynamicTool{tool},
		Message: `/call get_weather {"city":"Paris"}`})
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if len(ch.DynamicTools) != 1 || json.Unmarshal(ch.DynamicTools[0].OutputSchema, &got) != nil ||
		json.Unmarshal(tool.OutputSchema, &want) != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("dynamic_tools %+v, want the output_schema as declared", ch.DynamicTools)
	}
	ch = waitStatus(t, c, ch.ID, client.StatusRequiresAction)
	id := ch.RequiredAction.ToolCalls[0].ToolCallID

	_, err = c.SubmitToolResults(ctx, ch.ID, []client.ToolResult{client.TextResult(id, "sunny")})
	if ae := apiError(t, err, http.StatusBadRequest, "invalid_output"); ae.Details["tool_call_id"] != id || ae.Details["error"] == "" {
		t.Errorf("invalid_output details %+v", ae.Details)
	}
	after, err := c.SubmitToolResults(ctx, ch.ID, []client.ToolResult{{ToolCallID: id, Output: json.RawMessage(`{"temp_c":21}`)}})
	if err != nil || after.Status != client.StatusPending {
		t.Fatalf("submit: %+v, %v", after, err)
	}
}
