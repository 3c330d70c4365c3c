package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/parleyhq/parley/internal/config"
)

// modelTakes is what both models routes say a model takes.
type modelTakes struct {
	Inputs        []string `json:"inputs"`
	ContextWindow *int64   `json:"context_window"`
}

// TestModelsSayWhatTheyTake: GET /api/v1/models and the facade's
// /v1/models say, for each model, the kinds of content it takes and its
// context window (null when unknown): the echo model every kind, another
// provider text and images unless its entry says otherwise.
func TestModelsSayWhatTheyTake(t *testing.T) {
	s := newSQLite(t, func(su *setup) {
		su.cfg.Models = append(su.cfg.Models,
			config.Model{Name: "claude", Provider: "anthropic", Model: "claude-sonnet-4-5", Inputs: []string{"text", "image", "pdf"}},
			config.Model{Name: "local", Provider: "openai", Model: "qwen3", BaseURL: "http://127.0.0.1:1/v1", ContextWindow: 32768, Inputs: []string{"text"}})
	})
	tok := s.token("alice")
	w := func(n int64) *int64 { return &n }
	want := map[string]modelTakes{
		"echo":   {[]string{"text", "image", "pdf"}, nil},
		"fast":   {[]string{"text", "image"}, nil}, // behind a base_url: its window is unknown
		"claude": {[]string{"text", "image", "pdf"}, w(200000)},
		"local":  {[]string{"text"}, w(32768)},
	}

	var api struct {
		Models []struct {
			Name string `json:"name"`
			modelTakes
		} `json:"models"`
	}
	s.do("GET", "/api/v1/models", tok, nil).expect(t, http.StatusOK, &api)
	var facade struct {
		Data []struct {
			ID string `json:"id"`
			modelTakes
		} `json:"data"`
	}
	s.do("GET", "/v1/models", tok, nil).expect(t, http.StatusOK, &facade)
	var one struct {
		ID string `json:"id"`
		modelTakes
	}
	s.do("GET", "/v1/models/local", tok, nil).expect(t, http.StatusOK, &one)

	got := map[string][]modelTakes{}
	for _, m := range api.Models {
		got[m.Name] = append(got[m.Name], m.modelTakes)
	}
	for _, m := range facade.Data {
		got[m.ID] = append(got[m.ID], m.modelTakes)
	}
	got[one.ID] = append(got[one.ID], one.modelTakes)
	if len(got) != len(want) {
		t.Fatalf("models %v, want %d", got, len(want))
	}
	for name, w := range want {
		routes := map[string]int{"local": 3}[name]
		if routes == 0 {
			routes = 2
		}
		if len(got[name]) != routes {
			t.Errorf("%s: in %d answers, want %d", name, len(got[name]), routes)
		}
		for _, g := range got[name] {
			if !slices.Equal(g.Inputs, w.Inputs) || !equalWindow(g.ContextWindow, w.ContextWindow) {
				gj, _ := json.Marshal(g)
				wj, _ := json.Marshal(w)
				t.Errorf("%s: %s, want %s", name, gj, wj)
			}
		}
	}
}

func equalWindow(a, b *int64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
