package chatcli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
)

// approvalFake is a small fake of the parley API that a session uses,
// whose model calls a server-side tool needing approval (files_delete, of
// the source "files") when a message says "delete PATH", and with "both" a
// dynamic tool (get_weather) as well. It follows the approvals contract:
// POST /approvals carries exactly the pending approval ids, is a 409 once no
// approval is pending, and refuses edited args that are not an object with
// a string "path"; the chat runs on once no call of either kind remains,
// and its answer says what came of each call, the way the echo model does.
// "raced PATH" makes someone else approve first: the POST is then a 409.
// Any other message is echoed.
type approvalFake struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every new event
	chats     map[string]*fakeChat
	creates   []json.RawMessage // the bodies of POST /chats
	decisions []client.Decision // every decision taken
	posts     map[string]int    // route ("approvals", "tool-results") -> POSTs
}

// fakeChat is one chat of the fake.
type fakeChat struct {
	chat    client.Chat
	msgs    []client.Message
	events  []string // SSE frames of live events, in order
	calls   []client.ToolCall
	pending []client.ToolCall
	raced   bool
	outputs map[string]client.Part // call id -> its result
	decided []client.Part          // the tool-decision parts of the step
}

func newApprovalFake(t *testing.T) *approvalFake {
	f := &approvalFake{t: t, changed: make(chan struct{}), chats: map[string]*fakeChat{}, posts: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/chats", f.create)
	mux.HandleFunc("GET /api/v1/chats/{id}", f.withChat(func(w http.ResponseWriter, r *http.Request, fc *fakeChat) {
		fakeJSON(w, 200, fc.chat)
	}))
	mux.HandleFunc("GET /api/v1/chats/{id}/messages", f.withChat(func(w http.ResponseWriter, r *http.Request, fc *fakeChat) {
		var after int64
		fmt.Sscan(r.URL.Query().Get("after"), &after)
		out := []client.Message{}
		for _, m := range fc.msgs {
			if m.ID > after {
				out = append(out, m)
			}
		}
		fakeJSON(w, 200, map[string]any{"messages": out})
	}))
	mux.HandleFunc("POST /api/v1/chats/{id}/messages", f.withChat(func(w http.ResponseWriter, r *http.Request, fc *fakeChat) {
		var body struct {
			Message string `json:"message"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		if fc.chat.Status != client.StatusWaiting {
			fakeErr(w, 409, "chat_busy", "the fake takes messages of waiting chats only", map[string]any{"status": fc.chat.Status})
			return
		}
		m := f.userMessage(fc, body.Message)
		fakeJSON(w, 200, map[string]any{"message": m})
	}))
	mux.HandleFunc("POST /api/v1/chats/{id}/approvals", f.withChat(f.approvals))
	mux.HandleFunc("POST /api/v1/chats/{id}/tool-results", f.withChat(f.toolResults))
	mux.HandleFunc("POST /api/v1/chats/{id}/interrupt", f.withChat(func(w http.ResponseWriter, r *http.Request, fc *fakeChat) {
		fakeJSON(w, 200, fc.chat)
	}))
	mux.HandleFunc("GET /api/v1/chats/{id}/stream", f.stream)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// withChat runs h with the chat of the path, under the lock.
func (f *approvalFake) withChat(h func(http.ResponseWriter, *http.Request, *fakeChat)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		fc := f.chats[r.PathValue("id")]
		if fc == nil {
			fakeErr(w, 404, "not_found", "chat not found", nil)
			return
		}
		h(w, r, fc)
	}
}

func (f *approvalFake) create(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	json.NewDecoder(r.Body).Decode(&raw)
	var body struct {
		Message string `json:"message"`
	}
	json.Unmarshal(raw, &body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, raw)
	id := fmt.Sprintf("01a22723-d973-75eb-b20b-%012d", len(f.chats)+1)
	fc := &fakeChat{chat: client.Chat{ID: id, Owner: "alice", Model: "echo", Status: client.StatusWaiting}}
	f.chats[id] = fc
	if body.Message != "" {
		f.userMessage(fc, body.Message)
	}
	fakeJSON(w, 201, fc.chat)
}

// userMessage adds a user message and runs the model's step on it.
func (f *approvalFake) userMessage(fc *fakeChat, text string) client.Message {
	m := f.add(fc, client.RoleUser, client.Part{Type: client.PartText, Text: text})
	fc.calls, fc.outputs, fc.decided, fc.raced = nil, map[string]client.Part{}, nil, false
	n := len(fc.msgs)
	deleteCall := func(path string) client.ToolCall {
		return client.ToolCall{ToolCallID: fmt.Sprintf("call_%d_1", n), ToolName: "files_delete",
			Args: json.RawMessage(fmt.Sprintf(`{"path":%q}`, path)), Kind: client.ActionApproval,
			Source: "files", Description: "Delete a file"}
	}
	switch verb, arg, _ := strings.Cut(text, " "); verb {
	case "delete":
		fc.calls = []client.ToolCall{deleteCall(arg)}
	case "raced":
		fc.calls, fc.raced = []client.ToolCall{deleteCall(arg)}, true
	case "both":
		fc.calls = []client.ToolCall{
			{ToolCallID: fmt.Sprintf("call_%d_0", n), ToolName: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`), Kind: client.ActionClient},
			deleteCall("both.txt"),
		}
	default:
		f.add(fc, client.RoleAssistant, client.Part{Type: client.PartText, Text: "echo: " + text})
		return m
	}
	parts := make([]client.Part, len(fc.calls))
	for i, c := range fc.calls {
		parts[i] = client.Part{Type: client.PartToolCall, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Args: c.Args}
	}
	f.add(fc, client.RoleAssistant, parts...)
	fc.pending = slices.Clone(fc.calls)
	f.setStatus(fc, client.StatusRequiresAction)
	return m
}

// add appends a message to the history and announces it; the chat is left
// waiting after an assistant text.
func (f *approvalFake) add(fc *fakeChat, role string, parts ...client.Part) client.Message {
	m := client.Message{ID: int64(len(fc.msgs) + 1), ChatID: fc.chat.ID, Role: role, Parts: parts, CreatedAt: time.Now()}
	fc.msgs = append(fc.msgs, m)
	b, _ := json.Marshal(map[string]any{"message": m})
	f.emit(fc, fmt.Sprintf("id: %d\nevent: message\ndata: %s\n\n", m.ID, b))
	if role == client.RoleAssistant && m.Text() != "" {
		f.setStatus(fc, client.StatusWaiting)
	}
	return m
}

// setStatus changes the chat's status and announces it (with the pending
// calls for requires_action).
func (f *approvalFake) setStatus(fc *fakeChat, status string) {
	fc.chat.Status, fc.chat.RequiredAction = status, nil
	fc.chat.Version++
	if status == client.StatusRequiresAction {
		fc.chat.RequiredAction = &client.RequiredAction{ToolCalls: slices.Clone(fc.pending), Deadline: time.Now().Add(time.Hour)}
	}
	b, _ := json.Marshal(map[string]any{"status": status, "chat": fc.chat})
	f.emit(fc, "event: status\ndata: "+string(b)+"\n\n")
	if status == client.StatusRequiresAction {
		b, _ := json.Marshal(fc.chat.RequiredAction)
		f.emit(fc, "event: action_required\ndata: "+string(b)+"\n\n")
	}
}

func (f *approvalFake) emit(fc *fakeChat, frame string) {
	fc.events = append(fc.events, frame)
	close(f.changed)
	f.changed = make(chan struct{})
}

// stream is GET /stream: the status, the messages after the cursor, then
// the live events.
func (f *approvalFake) stream(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	fc := f.chats[r.PathValue("id")]
	if fc == nil {
		f.mu.Unlock()
		fakeErr(w, 404, "not_found", "chat not found", nil)
		return
	}
	var after int64
	fmt.Sscan(r.URL.Query().Get("after"), &after)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	b, _ := json.Marshal(map[string]any{"status": fc.chat.Status, "chat": fc.chat})
	fmt.Fprintf(w, "event: status\ndata: %s\n\n", b)
	for _, m := range fc.msgs {
		if m.ID > after {
			b, _ := json.Marshal(map[string]any{"message": m})
			fmt.Fprintf(w, "id: %d\nevent: message\ndata: %s\n\n", m.ID, b)
		}
	}
	next := len(fc.events)
	for {
		for _, frame := range fc.events[next:] {
			fmt.Fprint(w, frame)
		}
		next = len(fc.events)
		changed := f.changed
		f.mu.Unlock()
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		}
		f.mu.Lock()
	}
}

func (f *approvalFake) approvals(w http.ResponseWriter, r *http.Request, fc *fakeChat) {
	f.posts["approvals"]++
	var body struct {
		Decisions []client.Decision `json:"decisions"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	var want []string
	for _, c := range fc.pending {
		if c.NeedsApproval() {
			want = append(want, c.ToolCallID)
		}
	}
	if fc.raced && len(want) > 0 { // someone else's POST came first
		for _, id := range want {
			f.decide(fc, client.Decision{ToolCallID: id, Approve: true}, "bob")
		}
		want = nil
	}
	if fc.chat.Status != client.StatusRequiresAction || len(want) == 0 {
		fakeErr(w, 409, "status_conflict", "no approval is pending (the chat is "+fc.chat.Status+")", map[string]any{"status": fc.chat.Status})
		return
	}
	var got []string
	for _, d := range body.Decisions {
		got = append(got, d.ToolCallID)
	}
	if !slices.Equal(got, want) {
		fakeErr(w, 400, "invalid_decisions", fmt.Sprintf("decisions %v, want exactly %v", got, want), nil)
		return
	}
	for _, d := range body.Decisions {
		var args struct {
			Path *string `json:"path"`
		}
		if d.Args != nil && (json.Unmarshal(d.Args, &args) != nil || args.Path == nil) {
			fakeErr(w, 400, "invalid_args", fmt.Sprintf("args of %s do not match the schema of files_delete: /path: want a string", d.ToolCallID), nil)
			return
		}
	}
	for _, d := range body.Decisions {
		f.decide(fc, d, "alice")
	}
	fakeJSON(w, 200, fc.chat)
}

// decide takes a decision on a pending call, and ends the step when none is
// left.
func (f *approvalFake) decide(fc *fakeChat, d client.Decision, by string) {
	f.decisions = append(f.decisions, d)
	i := slices.IndexFunc(fc.pending, func(c client.ToolCall) bool { return c.ToolCallID == d.ToolCallID })
	call := fc.pending[i]
	fc.pending = slices.Delete(fc.pending, i, i+1)
	fc.decided = append(fc.decided, client.Part{Type: client.PartToolDecision, ToolCallID: call.ToolCallID, ToolName: call.ToolName, Args: d.Args,
		Decision: &client.ToolDecision{Approved: d.Approve, Reason: d.Reason, DecidedBy: by, Token: "test", DecidedAt: time.Now()}})
	res := client.Part{Type: client.PartToolResult, ToolCallID: call.ToolCallID, ToolName: call.ToolName}
	switch {
	case !d.Approve && d.Reason != "":
		res.Output, res.IsError = json.RawMessage(fmt.Sprintf("%q", "denied: "+d.Reason)), true
	case !d.Approve:
		res.Output, res.IsError = json.RawMessage(`"denied"`), true
	default:
		args := call.Args
		if d.Args != nil {
			args = d.Args
		}
		var a struct {
			Path string `json:"path"`
		}
		json.Unmarshal(args, &a)
		res.Output = json.RawMessage(fmt.Sprintf(`{"deleted":%q}`, a.Path))
	}
	fc.outputs[call.ToolCallID] = res
	f.stepDone(fc)
}

func (f *approvalFake) toolResults(w http.ResponseWriter, r *http.Request, fc *fakeChat) {
	f.posts["tool-results"]++
	var body struct {
		Results []client.ToolResult `json:"results"`
	}
	json.NewDecoder(r.Body).Decode(&body)
	var want, got []string
	for _, c := range fc.pending {
		if !c.NeedsApproval() {
			want = append(want, c.ToolCallID)
		}
	}
	if fc.chat.Status != client.StatusRequiresAction || len(want) == 0 {
		fakeErr(w, 409, "status_conflict", "no tool result is pending", map[string]any{"status": fc.chat.Status})
		return
	}
	for _, res := range body.Results {
		got = append(got, res.ToolCallID)
	}
	if !slices.Equal(got, want) {
		fakeErr(w, 400, "invalid_tool_results", fmt.Sprintf("results %v, want exactly %v", got, want), nil)
		return
	}
	for _, res := range body.Results {
		i := slices.IndexFunc(fc.pending, func(c client.ToolCall) bool { return c.ToolCallID == res.ToolCallID })
		call := fc.pending[i]
		fc.pending = slices.Delete(fc.pending, i, i+1)
		fc.outputs[call.ToolCallID] = client.Part{Type: client.PartToolResult, ToolCallID: call.ToolCallID, ToolName: call.ToolName, Output: res.Output, IsError: res.IsError}
	}
	f.stepDone(fc)
	fakeJSON(w, 200, fc.chat)
}

// stepDone runs the chat on once no call is pending: the tool message, and
// an answer saying what each call gave.
func (f *approvalFake) stepDone(fc *fakeChat) {
	if len(fc.pending) > 0 {
		f.setStatus(fc, client.StatusRequiresAction)
		return
	}
	f.setStatus(fc, client.StatusRunning)
	parts := slices.Clone(fc.decided)
	var answer []string
	for _, c := range fc.calls {
		res := fc.outputs[c.ToolCallID]
		parts = append(parts, res)
		var s string
		if json.Unmarshal(res.Output, &s) != nil {
			var v any
			_ = json.Unmarshal(res.Output, &v)
			b, _ := json.Marshal(v)
			s = string(b)
		}
		if res.IsError {
			answer = append(answer, fmt.Sprintf("tool %s failed: %s", c.ToolName, s))
		} else {
			answer = append(answer, fmt.Sprintf("tool %s returned %s", c.ToolName, s))
		}
	}
	f.add(fc, client.RoleTool, parts...)
	f.add(fc, client.RoleAssistant, client.Part{Type: client.PartText, Text: strings.Join(answer, "\n")})
}

// taken returns the decisions taken and the POSTs of each route.
func (f *approvalFake) taken() ([]client.Decision, map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.decisions), map[string]int{"approvals": f.posts["approvals"], "tool-results": f.posts["tool-results"]}
}

func fakeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func fakeErr(w http.ResponseWriter, code int, errCode, msg string, details map[string]any) {
	fakeJSON(w, code, map[string]any{"error": map[string]any{"code": errCode, "message": msg, "details": details}})
}

// TestChatApproval: an interactive session deciding on calls that need
// approval: the call shown with its source, description and arguments;
// approved, denied with and without a reason, approved with edited
// arguments (after input that is not an object, a cancelled edit and
// arguments the server refuses); a step with a dynamic tool call too,
// whose result and decision are both posted; and a decision someone else
// took first.
func TestChatApproval(t *testing.T) {
	t.Parallel()
	f := newApprovalFake(t)
	p := startChat(t, Options{URL: f.srv.URL, Token: "prl_test"})
	const prompt = "approve? [y/n/e(dit)] "

	p.send("delete a.txt")
	p.waitFor(p.stderr, "tool call files_delete needs your approval (source files)\n  Delete a file\n  args: {\n    \"path\": \"a.txt\"\n  }\n"+prompt)
	p.send("maybe")
	p.waitFor(p.stderr, "answer y (approve), n (deny) or e (edit the arguments, then approve)")
	p.send("y")
	p.waitFor(p.stdout, `tool files_delete returned {"deleted":"a.txt"}`)

	p.send("delete b.txt")
	p.waitFor(p.stderr, `"path": "b.txt"`)
	p.send("n")
	p.waitFor(p.stderr, "reason (optional)> ")
	p.send("not that one")
	p.waitFor(p.stdout, "tool files_delete failed: denied: not that one")

	p.send("delete c.txt")
	p.waitFor(p.stderr, `"path": "c.txt"`)
	p.send("n")
	p.send("")
	p.waitFor(p.stdout, "tool files_delete failed: denied\n")

	p.send("delete d.txt")
	p.waitFor(p.stderr, `"path": "d.txt"`)
	p.send("e")
	p.waitFor(p.stderr, "args> ")
	p.send("[1, 2]")
	p.waitFor(p.stderr, "not a JSON object: got an array, want an object {...}\n")
	p.send("e")
	p.send("{")
	p.waitFor(p.stderr, "...> ")
	p.send(`  "path": 5`)
	p.send("}")
	p.waitFor(p.stderr, "the server refused the decisions: args of call_13_1 do not match the schema of files_delete: /path: want a string\ndecide again:\n")
	p.waitCount(p.stderr, `"path": "d.txt"`, 2)
	p.send("e")
	p.send("")
	p.waitFor(p.stderr, "(edit cancelled)")
	p.send("e")
	p.send(`{"path": "d2.txt"}`)
	p.waitFor(p.stdout, `tool files_delete returned {"deleted":"d2.txt"}`)

	p.send("both")
	p.waitFor(p.stderr, `tool call get_weather {"city":"Paris"}`)
	p.send(`{"temp_c": 21}`)
	p.waitFor(p.stderr, `"path": "both.txt"`)
	p.send("y")
	p.waitFor(p.stdout, "tool get_weather returned {\"temp_c\":21}\ntool files_delete returned {\"deleted\":\"both.txt\"}")

	p.send("raced r.txt")
	p.waitFor(p.stderr, `"path": "r.txt"`)
	p.send("n")
	p.send("no")
	p.waitFor(p.stderr, "(decisions not taken: someone decided first, or the chat moved on; it is waiting now)")
	p.waitFor(p.stdout, `tool files_delete returned {"deleted":"r.txt"}`)

	p.send("thanks")
	p.waitFor(p.stdout, "echo: thanks")
	if err := p.wait(); err != nil {
		t.Fatalf("the session ended with %v at the end of input\nstderr:\n%s", err, p.stderr)
	}
	want := `tool files_delete returned {"deleted":"a.txt"}
tool files_delete failed: denied: not that one
tool files_delete failed: denied
tool files_delete returned {"deleted":"d2.txt"}
tool get_weather returned {"temp_c":21}
tool files_delete returned {"deleted":"both.txt"}
tool files_delete returned {"deleted":"r.txt"}
echo: thanks
`
	if got := p.stdout.String(); got != want {
		t.Errorf("stdout\n%s\nwant\n%s", got, want)
	}
	decisions, posts := f.taken()
	b, _ := json.Marshal(decisions)
	wantDecisions := `[{"tool_call_id":"call_1_1","approve":true},` +
		`{"tool_call_id":"call_5_1","approve":false,"reason":"not that one"},` +
		`{"tool_call_id":"call_9_1","approve":false},` +
		`{"tool_call_id":"call_13_1","approve":true,"args":{"path":"d2.txt"}},` +
		`{"tool_call_id":"call_17_1","approve":true},` +
		`{"tool_call_id":"call_21_1","approve":true}]` // the last one is the other decider's
	if string(b) != wantDecisions {
		t.Errorf("decisions\n%s\nwant\n%s", b, wantDecisions)
	}
	// d.txt: refused once; raced: a 409.
	if posts["approvals"] != 7 || posts["tool-results"] != 1 {
		t.Errorf("POSTs %v, want 7 to approvals and 1 to tool-results", posts)
	}
}

// TestChatApprovalEndOfInput: input that ends while a call waits for a
// decision is an error, and nothing is decided; the tools to approve go
// into the new chat's request.
func TestChatApprovalEndOfInput(t *testing.T) {
	t.Parallel()
	f := newApprovalFake(t)
	p := startChat(t, Options{URL: f.srv.URL, Token: "prl_test", Approve: []string{"files_*", "github_*", "http_fetch"}}, "delete z.txt")
	p.waitFor(p.stderr, "approve? [y/n/e(dit)] ")
	if err := p.wait(); err == nil || !strings.Contains(err.Error(), "end of input while tool call call_1_1 waits for your decision") {
		t.Fatalf("the session ended with %v, stderr:\n%s", err, p.stderr)
	}
	if decisions, posts := f.taken(); len(decisions) != 0 || posts["approvals"] != 0 {
		t.Errorf("decisions %v, posts %v; want none", decisions, posts)
	}
	f.mu.Lock()
	var req struct {
		Approve []string `json:"approve"`
	}
	json.Unmarshal(f.creates[0], &req)
	f.mu.Unlock()
	if !slices.Equal(req.Approve, []string{"files_*", "github_*", "http_fetch"}) {
		t.Errorf("approve %q in the create request", req.Approve)
	}
}
