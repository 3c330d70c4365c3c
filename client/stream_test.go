package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
)

// events reads a stream in the background; the channel closes at its end.
func events(s *client.ChatStream) <-chan client.ChatEvent {
	out := make(chan client.ChatEvent, 1024)
	go func() {
		defer close(out)
		for s.Next() {
			out <- s.Event()
		}
	}()
	return out
}

// until collects events until one satisfies stop, failing after wait.
func until(t *testing.T, ch <-chan client.ChatEvent, stop func(client.ChatEvent) bool) []client.ChatEvent {
	t.Helper()
	var got []client.ChatEvent
	timeout := time.After(wait)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended after %d events", len(got))
			}
			got = append(got, ev)
			if stop(ev) {
				return got
			}
		case <-timeout:
			t.Fatalf("no awaited event among %d", len(got))
		}
	}
}

func statusIs(st string) func(client.ChatEvent) bool {
	return func(ev client.ChatEvent) bool { return ev.Kind == client.EventStatus && ev.Status == st }
}

// summary is what a run of events delivered: the ids of durable messages
// (in order) and, per message, the text of its deltas.
func summary(evs []client.ChatEvent) (ids []int64, deltas map[int64]string) {
	deltas = map[int64]string{}
	for _, ev := range evs {
		switch ev.Kind {
		case client.EventMessage:
			ids = append(ids, ev.Message.ID)
		case client.EventPart:
			if ev.Part.Type == client.DeltaText {
				deltas[ev.MessageID] += ev.Part.Text
			}
		}
	}
	return ids, deltas
}

// TestStreamTurn: a stream opened before a message sees the whole turn: the
// status changes, the user message, the answer's deltas, the answer.
func TestStreamTurn(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Stream(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs := events(st)
	first := until(t, evs, func(client.ChatEvent) bool { return true })
	if first[0].Kind != client.EventStatus || first[0].Status != client.StatusWaiting || !first[0].Initial || first[0].Chat == nil || first[0].Chat.ID != ch.ID {
		t.Fatalf("first event %+v, want the current status", first[0])
	}
	if _, err := c.PostMessage(ctx, ch.ID, client.PostMessageRequest{Content: "one two three"}); err != nil {
		t.Fatal(err)
	}
	got := until(t, evs, statusIs(client.StatusWaiting))
	var answer *client.Message
	for _, ev := range got {
		if ev.Kind == client.EventMessage && ev.Message.Role == client.RoleAssistant {
			answer = ev.Message
		}
	}
	if answer == nil || answer.Text() != "echo: one two three" {
		t.Fatalf("answer %+v", answer)
	}
	for _, ev := range got {
		if ev.Initial {
			t.Errorf("live event %+v marked Initial", ev)
		}
	}
	ids, deltas := summary(got)
	if len(ids) != 2 || deltas[answer.ID] != answer.Text() {
		t.Errorf("messages %v, deltas %v; want the user message, the answer, and deltas that spell it", ids, deltas)
	}
	if st.Cursor() != answer.ID {
		t.Errorf("cursor %d, want %d", st.Cursor(), answer.ID)
	}

	// A stream from a cursor replays only what follows it.
	again, err := c.Stream(ctx, ch.ID, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	replay := until(t, events(again), func(ev client.ChatEvent) bool { return ev.Kind == client.EventMessage })
	if m := replay[len(replay)-1].Message; m.ID != answer.ID {
		t.Errorf("replay after %d starts with message %d, want %d", ids[0], m.ID, answer.ID)
	}

	// A stream of a chat that does not exist fails at once; Close ends a
	// blocked Next with no error.
	_, err = c.Stream(ctx, "01a22723-d973-75eb-b20b-b382b9defe5f", 0)
	apiError(t, err, http.StatusNotFound, "not_found")
	st.Close()
	for range evs {
	}
	if err := st.Err(); err != nil {
		t.Errorf("Err after Close = %v", err)
	}
}

// TestStreamReconnectResumes: the connection drops, messages are written
// while the stream is away, and the reconnection resumes after the last
// message delivered: nothing missed, nothing repeated.
func TestStreamReconnectResumes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Message: "first"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	st, err := c.Stream(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs := events(st)
	before := until(t, evs, func(ev client.ChatEvent) bool {
		return ev.Kind == client.EventMessage && ev.Message.Role == client.RoleAssistant
	})
	seen, _ := summary(before)

	// Hold the reconnection until the second turn is over.
	path := "/api/v1/chats/" + ch.ID + "/stream"
	arrived, release := make(chan *http.Request, 1), make(chan struct{})
	s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == path {
			arrived <- r
			<-release
		}
		return false
	})
	s.srv.CloseClientConnections()
	var re *http.Request
	select {
	case re = <-arrived:
	case <-time.After(wait):
		t.Fatal("the stream did not reconnect")
	}
	if got, want := re.URL.Query().Get("after"), fmt.Sprint(seen[len(seen)-1]); got != want {
		t.Errorf("reconnected with after=%q, want %q", got, want)
	}
	if _, err := c.PostMessage(ctx, ch.ID, client.PostMessageRequest{Content: "second"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	s.setIntercept(nil)
	close(release)

	after := until(t, evs, func(ev client.ChatEvent) bool {
		return ev.Kind == client.EventMessage && ev.Message.Text() == "echo: second"
	})
	if after[0].Kind != client.EventStatus || !after[0].Initial || after[0].Status != client.StatusWaiting {
		t.Errorf("first event after the reconnection %+v, want the Initial status", after[0])
	}
	ids, _ := summary(after)
	all, err := c.AllMessages(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := append(seen, ids...), messageIDs(all); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("delivered messages %v, want each of %v once", got, want)
	}
}

// TestStreamResync: a resync from the server makes the stream reconnect
// after its cursor.
func TestStreamResync(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c, ctx := s.client(), testCtx(t)
	ch, err := c.CreateChat(ctx, client.CreateChatRequest{Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, ch.ID, client.StatusWaiting)
	var once sync.Once
	s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		handled := false
		once.Do(func() {
			handled = true
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": connected\n\nevent: resync\ndata: {\"kind\":\"resync\"}\n\n")
		})
		return handled
	})
	st, err := c.Stream(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got := until(t, events(st), func(ev client.ChatEvent) bool {
		return ev.Kind == client.EventMessage && ev.Message.Role == client.RoleAssistant
	})
	if got[0].Kind != client.EventStatus {
		t.Errorf("first event %q, want status", got[0].Kind)
	}
	if n := len(s.requestsTo("/api/v1/chats/" + ch.ID + "/stream")); n != 2 {
		t.Errorf("%d stream requests, want 2 (the resync, then the real one)", n)
	}
}

// TestStreamDropsRepeatedParts: after a reconnection mid-step the server
// sends the step's deltas from the start; the stream delivers each once.
func TestStreamDropsRepeatedParts(t *testing.T) {
	t.Parallel()
	part := func(id int, text string) string {
		return fmt.Sprintf("event: part\ndata: {\"message_id\":%d,\"part\":{\"type\":\"text-delta\",\"text\":%q,\"index\":0}}\n\n", id, text)
	}
	status := "event: status\ndata: {\"status\":\"running\",\"chat\":{\"id\":\"c\",\"status\":\"running\"}}\n\n"
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns++
		n := conns
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		switch n {
		case 1: // two deltas, then the connection drops
			fmt.Fprint(w, status+part(7, "a")+part(7, "b"))
		case 2: // the snapshot from the start, one new delta, the message
			fmt.Fprint(w, status+part(7, "a")+part(7, "b")+part(7, "c")+
				"id: 7\nevent: message\ndata: {\"message\":{\"id\":7,\"role\":\"assistant\",\"parts\":[{\"type\":\"text\",\"text\":\"abc\"}]}}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	c := client.New(srv.URL, "t", client.WithReconnectDelay(time.Millisecond, time.Millisecond))
	st, err := c.Stream(testCtx(t), "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got := until(t, events(st), func(ev client.ChatEvent) bool { return ev.Kind == client.EventMessage })
	var kinds []string
	text := ""
	for _, ev := range got {
		kinds = append(kinds, ev.Kind)
		if ev.Kind == client.EventPart {
			text += ev.Part.Text
		}
	}
	if text != "abc" || strings.Join(kinds, ",") != "status,part,part,status,part,message" {
		t.Errorf("deltas %q, events %v; want each delta once", text, kinds)
	}
}

func messageIDs(msgs []client.Message) []int64 {
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// TestStreamEndsOnContext: the stream's context ending ends Next with the
// context's error.
func TestStreamEndsOnContext(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := s.client()
	ch, err := c.CreateChat(testCtx(t), client.CreateChatRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := c.Stream(ctx, ch.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	evs := events(st)
	until(t, evs, statusIs(client.StatusWaiting))
	cancel()
	select {
	case _, ok := <-evs:
		for ok {
			_, ok = <-evs
		}
	case <-time.After(wait):
		t.Fatal("the stream did not end with its context")
	}
	if err := st.Err(); err != context.Canceled {
		t.Errorf("Err = %v, want context.Canceled", err)
	}
}

// TestStreamToolProgress: a server-side call's progress reports arrive,
// with their numbers and message, though the message that made the call
// was delivered before them.
func TestStreamToolProgress(t *testing.T) {
	t.Parallel()
	progress := func(p int, msg string) string {
		return fmt.Sprintf("event: part\ndata: {\"message_id\":7,\"part\":{\"type\":\"tool-progress\",\"tool_call_id\":\"call_1\",\"tool_name\":\"everything_slow\",\"progress\":%d,\"total\":10,\"message\":%q}}\n\n", p, msg)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 7\nevent: message\ndata: {\"message\":{\"id\":7,\"role\":\"assistant\",\"parts\":[{\"type\":\"tool_call\",\"tool_call_id\":\"call_1\",\"tool_name\":\"everything_slow\",\"args\":{}}]}}\n\n"+
			progress(3, "step 3")+progress(6, "")+
			"event: status\ndata: {\"status\":\"waiting\",\"chat\":{\"id\":\"c\",\"status\":\"waiting\"}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := client.New(srv.URL, "t")
	st, err := c.Stream(testCtx(t), "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var reports []string
	for _, ev := range until(t, events(st), statusIs(client.StatusWaiting)) {
		if ev.Kind == client.EventPart && ev.Part.Type == client.DeltaToolProgress {
			p := ev.Part
			reports = append(reports, fmt.Sprintf("%d %s %s %g/%g %s", ev.MessageID, p.ToolCallID, p.ToolName, p.Progress, p.Total, p.Message))
		}
	}
	want := "7 call_1 everything_slow 3/10 step 3;7 call_1 everything_slow 6/10 "
	if got := strings.Join(reports, ";"); got != want {
		t.Errorf("reports %q, want %q", got, want)
	}
}
