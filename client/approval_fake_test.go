package client_test

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

// approvalServer is a fake of the routes the runner and Decide use, holding
// chats that wait on calls of both kinds. It follows the approvals contract
// strictly: POST /approvals must carry exactly the pending approval ids
// (400 naming the missing, unknown and duplicate ones), is a 409 once no
// approval is pending, and refuses edited args that are not an object with
// a string "path" (the schema of its tools); POST /tool-results likewise
// for the dynamic tool calls. A chat becomes pending once no call of either
// kind remains; while some remain, the owner's feed announces them again.
type approvalServer struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	chats     map[string]*fakeChat
	order     []string
	feeds     []chan string // SSE frames for each open feed
	approvals int           // POST /approvals requests
	toolPosts int           // POST /tool-results requests
}

// fakeChat is one chat of the fake, with what was posted to it.
type fakeChat struct {
	chat      client.Chat
	pending   []client.ToolCall
	decisions []client.Decision
	results   []client.ToolResult
}

func newApprovalServer(t *testing.T) *approvalServer {
	t.Helper()
	s := &approvalServer{t: t, chats: map[string]*fakeChat{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/chats/watch", s.watch)
	mux.HandleFunc("GET /api/v1/chats", s.list)
	mux.HandleFunc("GET /api/v1/chats/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		fc := s.chats[r.PathValue("id")]
		if fc == nil {
			writeErr(w, 404, "not_found", "chat not found", nil)
			return
		}
		writeJSON(w, 200, fc.chat)
	})
	mux.HandleFunc("POST /api/v1/chats/{id}/approvals", s.decide)
	mux.HandleFunc("POST /api/v1/chats/{id}/tool-results", s.toolResults)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		s.mu.Lock()
		for _, f := range s.feeds {
			close(f)
		}
		s.feeds = nil
		s.mu.Unlock()
		s.srv.Close()
	})
	return s
}

func (s *approvalServer) client() *client.Client {
	return client.New(s.srv.URL, "prl_test", client.WithReconnectDelay(5*time.Millisecond, 50*time.Millisecond))
}

// addChat makes a chat in requires_action waiting on calls.
func (s *approvalServer) addChat(id string, calls ...client.ToolCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fc := &fakeChat{chat: client.Chat{ID: id, Owner: "alice", Model: "echo"}, pending: calls}
	s.chats[id] = fc
	s.order = append(s.order, id)
	s.refresh(fc)
}

// refresh sets the chat's status and required_action from its pending
// calls, and announces what remains on the feed.
func (s *approvalServer) refresh(fc *fakeChat) {
	fc.chat.Version++
	if len(fc.pending) == 0 {
		fc.chat.Status, fc.chat.RequiredAction = client.StatusPending, nil
		s.broadcast("status_change", client.FeedEvent{Kind: client.FeedStatusChange, Chat: fc.chat})
		return
	}
	fc.chat.Status = client.StatusRequiresAction
	fc.chat.RequiredAction = &client.RequiredAction{ToolCalls: slices.Clone(fc.pending), Deadline: time.Now().Add(time.Minute)}
	s.broadcast(client.FeedActionRequired, client.FeedEvent{Kind: client.FeedActionRequired, Chat: fc.chat, ToolCalls: slices.Clone(fc.pending)})
}

func (s *approvalServer) broadcast(kind string, ev client.FeedEvent) {
	b, _ := json.Marshal(ev)
	frame := fmt.Sprintf("event: %s\ndata: %s\n\n", kind, b)
	for _, f := range s.feeds {
		select {
		case f <- frame:
		default: // a slow reader misses it; the chat stays listed
		}
	}
}

// chat returns a copy of what a chat holds now.
func (s *approvalServer) chat(id string) fakeChat {
	s.mu.Lock()
	defer s.mu.Unlock()
	fc := *s.chats[id]
	fc.pending = slices.Clone(fc.pending)
	fc.decisions = slices.Clone(fc.decisions)
	fc.results = slices.Clone(fc.results)
	return fc
}

// posts returns how many POST /approvals and /tool-results arrived.
func (s *approvalServer) posts() (approvals, toolResults int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.approvals, s.toolPosts
}

func (s *approvalServer) watch(w http.ResponseWriter, r *http.Request) {
	f := make(chan string, 64)
	s.mu.Lock()
	s.feeds = append(s.feeds, f)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fmt.Fprint(w, ": connected\n\n")
	w.(http.Flusher).Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case frame, ok := <-f:
			if !ok {
				return
			}
			fmt.Fprint(w, frame)
			w.(http.Flusher).Flush()
		}
	}
}

func (s *approvalServer) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	statuses := r.URL.Query()["status"]
	page := client.ChatPage{Chats: []client.Chat{}}
	for _, id := range s.order {
		if ch := s.chats[id].chat; len(statuses) == 0 || slices.Contains(statuses, ch.Status) {
			page.Chats = append(page.Chats, ch)
		}
	}
	writeJSON(w, 200, page)
}

// decide is POST /approvals.
func (s *approvalServer) decide(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Decisions []client.Decision `json:"decisions"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Decisions == nil {
		writeErr(w, 400, "invalid_json", fmt.Sprintf("want {\"decisions\": [...]}: %v", err), nil)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.approvals++
	fc := s.chats[r.PathValue("id")]
	if fc == nil {
		writeErr(w, 404, "not_found", "chat not found", nil)
		return
	}
	want := idsOf(fc.pending, client.ActionApproval)
	if fc.chat.Status != client.StatusRequiresAction || len(want) == 0 {
		writeErr(w, 409, "status_conflict", "decisions are accepted only while approvals are pending (the chat is "+fc.chat.Status+")",
			map[string]any{"status": fc.chat.Status})
		return
	}
	got := make([]string, len(body.Decisions))
	for i, d := range body.Decisions {
		got[i] = d.ToolCallID
	}
	if msg, details := checkIDs(want, got); msg != "" {
		writeErr(w, 400, "invalid_decisions", msg, details)
		return
	}
	for _, d := range body.Decisions {
		if d.Args == nil {
			continue
		}
		var args struct {
			Path *string `json:"path"`
		}
		if err := json.Unmarshal(d.Args, &args); err != nil || args.Path == nil {
			writeErr(w, 400, "invalid_args", fmt.Sprintf("args of %s: want an object with a string path", d.ToolCallID),
				map[string]any{"tool_call_id": d.ToolCallID})
			return
		}
	}
	fc.decisions = append(fc.decisions, body.Decisions...)
	fc.pending = slices.DeleteFunc(fc.pending, func(c client.ToolCall) bool { return c.NeedsApproval() })
	s.refresh(fc)
	writeJSON(w, 200, fc.chat)
}

// toolResults is POST /tool-results.
func (s *approvalServer) toolResults(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Results []client.ToolResult `json:"results"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeErr(w, 400, "invalid_json", err.Error(), nil)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.toolPosts++
	fc := s.chats[r.PathValue("id")]
	if fc == nil {
		writeErr(w, 404, "not_found", "chat not found", nil)
		return
	}
	want := idsOf(fc.pending, client.ActionClient)
	if fc.chat.Status != client.StatusRequiresAction || len(want) == 0 {
		writeErr(w, 409, "status_conflict", "tool results are accepted only while the chat waits for them (the chat is "+fc.chat.Status+")",
			map[string]any{"status": fc.chat.Status})
		return
	}
	got := make([]string, len(body.Results))
	for i, res := range body.Results {
		got[i] = res.ToolCallID
	}
	if msg, details := checkIDs(want, got); msg != "" {
		writeErr(w, 400, "invalid_tool_results", msg, details)
		return
	}
	fc.results = append(fc.results, body.Results...)
	fc.pending = slices.DeleteFunc(fc.pending, func(c client.ToolCall) bool { return !c.NeedsApproval() })
	s.refresh(fc)
	writeJSON(w, 200, fc.chat)
}

// idsOf returns the ids of the calls of a kind.
func idsOf(calls []client.ToolCall, kind string) []string {
	var ids []string
	for _, c := range calls {
		if c.NeedsApproval() == (kind == client.ActionApproval) {
			ids = append(ids, c.ToolCallID)
		}
	}
	return ids
}

// checkIDs compares the posted ids with the pending ones.
func checkIDs(want, got []string) (string, map[string]any) {
	missing, unknown, duplicate := []string{}, []string{}, []string{}
	seen := map[string]bool{}
	for _, id := range got {
		switch {
		case seen[id]:
			duplicate = append(duplicate, id)
		case !slices.Contains(want, id):
			unknown = append(unknown, id)
		}
		seen[id] = true
	}
	for _, id := range want {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	if len(missing)+len(unknown)+len(duplicate) == 0 {
		return "", nil
	}
	var msg []string
	for _, l := range []struct {
		what string
		ids  []string
	}{{"missing", missing}, {"unknown", unknown}, {"duplicate", duplicate}} {
		if len(l.ids) > 0 {
			msg = append(msg, l.what+" "+strings.Join(l.ids, ", "))
		}
	}
	return strings.Join(msg, "; "), map[string]any{"missing": missing, "unknown": unknown, "duplicate": duplicate}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, errCode, msg string, details map[string]any) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": errCode, "message": msg, "details": details}})
}
