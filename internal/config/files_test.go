package config

import (
	"strings"
	"testing"
)

func TestFilesDefaultsAndInputs(t *testing.T) {
	cfg, err := Load(Overrides{ConfigFile: writeConfig(t, `models:
  - {name: a, provider: echo}
  - {name: b, provider: echo, inputs: [text, image, pdf]}
  - {name: c, provider: echo, inputs: [text]}
  - {name: d, provider: openai, model: gpt-4o}
`)}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Files.MaxBytes != 20<<20 {
		t.Errorf("files.max_bytes defaults to %d, want 20 MiB", cfg.Files.MaxBytes)
	}
	for _, c := range []struct {
		model, kind string
		want        bool
	}{
		// echo takes every kind unless told otherwise: it only says what it got
		{"a", InputText, true}, {"a", InputImage, true}, {"a", InputPDF, true},
		{"b", InputPDF, true}, {"c", InputImage, false}, {"c", InputText, true},
		// another provider takes text and images unless told otherwise
		{"d", InputText, true}, {"d", InputImage, true}, {"d", InputPDF, false},
	} {
		m, _ := cfg.FindModel(c.model)
		if got := m.TakesInput(c.kind); got != c.want {
			t.Errorf("model %s takes %s: %v, want %v", c.model, c.kind, got, c.want)
		}
	}
}

func TestFilesErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"files:\n  max_bytes: 0\n", "files.max_bytes 0"},
		{"files:\n  max_bytes: 536870913\n", "files.max_bytes 536870913"},
		{"models:\n  - {name: a, provider: echo, inputs: [text, audio]}\n", `models[0] (a): inputs: "audio" is not one of text, image, pdf`},
	} {
		_, err := Load(Overrides{ConfigFile: writeConfig(t, c.yaml)}, env{}.get)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%q) = %v, want an error with %q", c.yaml, err, c.want)
		}
	}
}
