package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/parleyhq/parley/client"
)

// TestPostMessageSendsMessage: PostMessage sends the text as "message", the
// name POST /api/v1/chats uses too, and not as the older "content".
func TestPostMessageSendsMessage(t *testing.T) {
	t.Parallel()
	bodies := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"message":{"id":2,"chat_id":"c","role":"user","parts":[{"type":"text","text":"hi"}]}}`)
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "prl_test")
	if _, err := c.PostMessage(context.Background(), "01a22723-d973-75eb-b20b-b382b9defe5f", client.PostMessageRequest{Content: "hi", Busy: client.BusyReject}); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(<-bodies, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["message"] != "hi" || got["busy"] != "reject" {
		t.Errorf("body %v, want {message: hi, busy: reject}", got)
	}
}
