package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWebhooksDefaults(t *testing.T) {
	cfg, err := Load(Overrides{}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 24 * time.Hour}
	if w := cfg.Webhooks; !slices.Equal(w.Schedule(), want) || w.AllowPrivate || w.MaxConsecutiveFailures != 10 ||
		time.Duration(w.Timeout) != 15*time.Second {
		t.Fatalf("webhooks defaults = %+v", w)
	}
}

func TestWebhooksFile(t *testing.T) {
	cfg, err := Load(Overrides{ConfigFile: writeConfig(t, "webhooks:\n  retry_schedule: [10ms, 1s]\n  allow_private: true\n  max_consecutive_failures: 0\n  timeout: 2s\n")}, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Webhooks; !slices.Equal(w.Schedule(), []time.Duration{10 * time.Millisecond, time.Second}) ||
		!w.AllowPrivate || w.MaxConsecutiveFailures != 0 || time.Duration(w.Timeout) != 2*time.Second {
		t.Fatalf("webhooks = %+v", w)
	}
	for yaml, want := range map[string]string{
		"webhooks:\n  retry_schedule: [5s, 0s]\n":                               "webhooks.retry_schedule[1]",
		"webhooks:\n  retry_schedule: [200h]\n":                                 "at most 168h",
		"webhooks:\n  max_consecutive_failures: -1\n":                           "webhooks.max_consecutive_failures",
		"webhooks:\n  timeout: 500ms\n":                                         "webhooks.timeout 500ms: want 1s to 1m",
		"webhooks:\n  timeout: 2m\n":                                            "webhooks.timeout 2m0s: want 1s to 1m",
		"webhooks:\n  retry_schedule: [" + strings.Repeat("1s, ", 20) + "1s]\n": "at most 20",
	} {
		_, err := Load(Overrides{ConfigFile: writeConfig(t, yaml)}, env{}.get)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to mention %q", yaml, err, want)
		}
	}
}
