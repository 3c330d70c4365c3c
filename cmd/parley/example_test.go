package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExampleConfigStartsAsWritten: examples/parley.yaml starts `parley
// serve` from the repository's root with no provider key, and its Lua tools
// answer a call (the offline ones: the weather tool needs the network).
func TestExampleConfigStartsAsWritten(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir() // not ./parley-data: the test must leave the checkout as it was
	s := startServe(t, root, nil, "--config", "examples/parley.yaml", "--data-dir", data)

	_, body := get(t, s.URL+"/api/v1/tools", s.Token)
	for _, name := range []string{"current_weather", "remember", "recall"} {
		if !strings.Contains(body, `"name":"`+name+`"`) {
			t.Errorf("tool %s is not listed: %s", name, body)
		}
	}
	code, body := do(t, "POST", s.URL+"/api/v1/chats", s.Token, `{"message": "/call remember {\"key\": \"todo\", \"text\": \"buy milk\"}"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var c struct{ ID string }
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(deadline)
	for {
		_, body = get(t, s.URL+"/api/v1/chats/"+c.ID+"/messages", s.Token)
		if strings.Contains(body, `"type":"tool-result"`) {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("no tool result: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(body, `"is_error":true`) {
		t.Fatalf("the remember call failed: %s", body)
	}
}
